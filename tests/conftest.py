"""Shared fixtures: reports of whole mha-check runs, computed in the background while the tests run.

Every report comes from a child forked from a warm zygote (the batch-grading path: torch imported once per worker,
isolation as in production), two at a time.  A test module declares the reports it needs, in its tests' order
(`reports.want([...])`), and reads each one when it gets to it: the first is computed at once, and each read
starts the next few (LOOKAHEAD), so pytest's progress shows as reports arrive instead of minutes of silence, and a
module whose tests xdist shares between two workers (--dist worksteal) costs each worker only its own share.
"""
from __future__ import annotations

import ast
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ZOO = ROOT / "tests" / "zoo"
REALZOO = ROOT / "tests" / "realzoo"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before numpy, as mha-check's own process (frontends/cli.py)

from harness.engine import rewrite  # noqa: E402 - after the path is set
from harness.sandbox.template import TEMPLATE_VARIABLE, Template  # noqa: E402


@functools.lru_cache(maxsize=None)
def zoo_constants(path: Path) -> dict:
    """The module-level literal constants of a zoo file (TARGET, EXPECT, OUTCOME, ...), read without importing it
    (parsed through the engine's lock: diagnoses parse in threads beside the tests, see harness.engine.rewrite)."""
    out = {}
    for node in rewrite.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper():
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


SAME_ON_OTHER_LINES = rewrite.KINDS["split-all"]  # "# and the other two projections alike"
OTHER_LINES_NOTES = tuple(note for note in rewrite.KINDS.values() if note)  # the fixes made on the other lines too
# (split-all's, repeat's: the keys' and the values' .repeat on lines of their own; split-pair's "likewise the other
# projection split this way": only the lines the trace marks, the third projection is split right)


MOVED = re.compile(r"(?P<new>.+?) before (?P<anchor>.+), and delete this line")  # harness.engine.rewrite's
# "after-softmax": a line added before another, this one deleted


def pasted(path: Path, fixes: list[tuple]) -> str:
    """The file with each (line, fix, rewrite kind[, the trace mark's words[, the lines the trace marks with the
    mistake]]) pasted in as a student would, indentation kept; a fix that ends with one of OTHER_LINES_NOTES
    (SAME_ON_OTHER_LINES, say) is made on those lines too (each rewritten by its own line's fix, read with the same
    words): on the marked lines when they are given, else on every line the fix rewrites."""
    lines = path.read_text().splitlines()
    for number, fix, kind, *rest in fixes:
        told, marked = rest[:1], (rest[1] if len(rest) > 1 else None)
        note = next((n for n in OTHER_LINES_NOTES if fix.endswith(n)), None)
        if note is not None:
            fix = fix.removesuffix(note).rstrip()
            for i, line in enumerate(lines):
                same = rewrite.own_line_fix(kind, line, *told)
                if i != number - 1 and same is not None and (marked is None or i + 1 in marked):
                    lines[i] = line[:len(line) - len(line.lstrip())] + same.removesuffix(note).rstrip()
        moved = MOVED.fullmatch(fix)
        if moved:  # "X before Y, and delete this line": the mask moved onto the scores, before the softmax
            anchor = next(i for i, line in enumerate(lines) if line.strip().startswith(moved["anchor"]))
            indent = lines[anchor][:len(lines[anchor]) - len(lines[anchor].lstrip())]
            del lines[number - 1:statement_end(lines, number)]
            lines.insert(anchor if anchor < number - 1 else anchor - 1, indent + moved["new"])
            continue
        old = lines[number - 1]
        last = statement_end(lines, number)  # a statement over several lines: the fix, one line, replaces all of
        # them, as the report's "you wrote" shows them joined (pasted over its first line alone, it broke the file)
        lines[number - 1:last] = [old[:len(old) - len(old.lstrip())] + fix]
    return "\n".join(lines) + "\n"


def statement_end(lines: list[str], number: int) -> int:
    """The last line of the simple statement that starts at line `number` (itself where it is one line, or no simple
    statement starts there)."""
    tree = rewrite.parse("\n".join(lines) + "\n")
    return next((node.end_lineno for node in ast.walk(tree) if isinstance(node, ast.stmt) and node.lineno == number
                 and not hasattr(node, "body")), number)


@functools.lru_cache(maxsize=None)
def unreadable_checkout(uid: int = 61950) -> str | None:
    """Why an unprivileged uid cannot read this checkout (None: it can, or this is not root).  Without namespaces
    nothing is mounted for a child: it runs mha-check's files where they lie, so in a clone below a 0700 home or a
    `mktemp -d` folder the walls without namespaces cannot be tested (and mha-check itself refuses to grade so, see
    isolation.unfit_to_grade): those tests are skipped with this reason, never failed; clone into a folder every
    user can enter to test them."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    needed = [str(ROOT / "harness" / "__init__.py")]  # the children run the system Python
    probe = subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", "/usr/bin/python3",
                            "-I", "-c", "import os, sys; print([p for p in sys.argv[1:] if not os.access(p, os.R_OK)])",
                            *needed], capture_output=True, text=True, timeout=60)
    unreadable = probe.stdout.strip()
    if probe.returncode != 0 or unreadable != "[]":
        return (f"an unprivileged uid cannot read {unreadable or needed} (the checkout lies in a folder other users "
                "cannot enter): the walls without namespaces need it readable; clone into a folder every user can "
                "enter to test them")
    return None


LOOKAHEAD = 3  # reports computed ahead of the test that reads one: enough to keep the pool's two threads busy


class Reports:
    """run_checks reports by (target, options), computed by a pool of forked children in the background."""

    def __init__(self, workers: int = max(2, os.cpu_count() or 2)):
        from harness.sandbox.pool import ZygotePool

        self.zygotes = ZygotePool(workers)
        self.pool = ThreadPoolExecutor(workers)
        self.futures: dict[tuple, Future] = {}
        self.orders: list[list[tuple]] = []  # each want(): its (target, options) in the tests' order
        self.lock = threading.Lock()

    def _run(self, target: str, options: tuple):
        from harness.engine.runner import Options, run_checks
        from harness.sandbox.pool import Fork
        from harness.sandbox.subject import Subject

        opts = dict(options)
        with self.zygotes.take() as zygote:
            def make():
                return Subject(target, overrides=opts.get("overrides", {}), seed=opts.get("seed", 0),
                               weight_map=opts.get("weight_map", {}), limits=opts.get("limits"), start=Fork(zygote))

            return run_checks(target, Options(**opts), subject=make(), make_subject=make)

    @staticmethod
    def _key(target: str, options: dict) -> tuple:
        return target, tuple(sorted((k, v if not isinstance(v, dict) else tuple(sorted(v.items())))
                                    for k, v in options.items()))

    def _start(self, target: str, options: dict) -> Future:
        key = self._key(target, options)
        if key not in self.futures:
            self.futures[key] = self.pool.submit(self._run, target, tuple(options.items()))
        return self.futures[key]

    def want(self, targets, **options) -> None:
        """The reports a module will read, in its tests' order; the first few are started now."""
        order = [(t, options) for t in targets]
        with self.lock:
            self.orders.append(order)
            for t, o in order[:1 + LOOKAHEAD]:
                self._start(t, o)

    def __call__(self, target: str, **options):
        with self.lock:
            found = self._start(target, options)
            key = self._key(target, options)
            for order in self.orders:
                at = next((i for i, (t, o) in enumerate(order) if self._key(t, o) == key), None)
                for t, o in order[at + 1: at + 1 + LOOKAHEAD] if at is not None else ():
                    self._start(t, o)
        return found.result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.zygotes.close()


_REPORTS: Reports | None = None


def reports_instance() -> Reports:
    global _REPORTS
    if _REPORTS is None:
        _REPORTS = Reports()
    return _REPORTS


@pytest.fixture(scope="session")
def reports():
    yield reports_instance()


def report_for(target: str, **options):
    return reports_instance()(target, **options)


_TEMPLATE = None  # this test process's warm template for single runs (started at the first use)
_TEMPLATE_LOCK = threading.Lock()


def warm_template_address() -> str:
    """Where this test process's warm template listens (`harness.sandbox.template.Template(address=...)`), in a folder
    that only our user may enter."""
    global _TEMPLATE
    with _TEMPLATE_LOCK:
        if _TEMPLATE is None:
            _TEMPLATE = Template(address=os.path.join(tempfile.mkdtemp(prefix="mha-check-suite-"), "template"))
    return _TEMPLATE.address


@pytest.fixture
def warm_single_runs(monkeypatch):
    """Single runs started by the test (`mha-check` subprocesses, notebooks' kernels, `harness.check`) fork their
    child from this process's warm template ($MHA_CHECK_TEMPLATE, see `harness.sandbox.pool.single_run`) instead
    of importing torch afresh: about 1.1 s less per run.  For the tests of what a single run reports and prints;
    the tests of a fresh start itself (start-up, the hostile single runs, Ctrl-C) do not use it."""
    monkeypatch.setenv(TEMPLATE_VARIABLE, warm_template_address())


def pytest_configure(config):
    config.pluginmanager.import_plugin("leftovers")  # the session fails if it leaves a process behind


def pytest_sessionfinish(session, exitstatus):
    if _REPORTS is not None:
        _REPORTS.close()
    if _TEMPLATE is not None:
        _TEMPLATE.close()
        shutil.rmtree(os.path.dirname(_TEMPLATE.address), ignore_errors=True)


def processes_left(folder: Path, seconds: float = 15) -> list[str]:
    """Pids of processes still running, after up to `seconds`, that carry `folder` in their environment: a run
    started with TMPDIR inside `folder` passes it to everything it starts (the graders, the template, the zygotes
    as TMPDIR, the children as their scratch HOME), so this finds what that run left, and nothing of other tests."""
    def mentioning() -> list[str]:
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                try:
                    with open(f"/proc/{entry}/environ", "rb") as f:
                        if str(folder).encode() in f.read():
                            found.append(entry)
                except OSError:
                    continue
        return found

    deadline = time.monotonic() + seconds
    while mentioning() and time.monotonic() < deadline:
        time.sleep(0.2)
    return mentioning()


def described(pids: list[str]) -> str:
    """What each process left is, for a failure's message: its state, parent, uid and command line (a left process
    seen once under load, 2 of 12 runs of test_a_killed_grader_leaves_no_process_behind, said only its pid)."""
    lines = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
            uid = (fields.get("Uid") or "?").split()[0]
            lines.append(f"{pid}: {fields.get('State')}, parent {fields.get('PPid')}, uid {uid}, {command}")
        except OSError:
            lines.append(f"{pid}: gone")
    return "\n".join(lines)


QUICK_E2E = {"test_adapter.py", "test_api.py", "test_formats.py"}  # a few child processes each: in the quick run


def pytest_collection_modifyitems(config, items):
    """Tests under tests/e2e/ are marked e2e, and slow unless they are in QUICK_E2E: `pytest -m "not slow"` is the
    quick run (the unit tests and a short end-to-end smoke), the default run is everything."""
    for item in items:
        path = Path(str(item.fspath))
        if "e2e" in path.parts:
            item.add_marker(pytest.mark.e2e)
            if path.name not in QUICK_E2E:
                item.add_marker(pytest.mark.slow)
