"""End-to-end tests of the `mha-check` command line, run as a student runs it: in a subprocess.

What is pinned down here is the contract with the person at the keyboard, not the checks' internals:

* exit status: 0 every check passed, 1 a check failed or could not be decided (a target that cannot be imported or
  built is a failing `construct` check), 2 the command line itself is wrong;
* `--format json`: stdout is exactly one JSON object (whatever the student's code prints goes elsewhere);
* a mistake in the student's code, or on the command line, is a clear message, never a traceback of ours;
* a student's `checks.py`, `reference.py`, `harness.py` or `mutants.py` never shadows the tool's own packages.

Each run's child is forked from the test process's warm template (`warm_single_runs` in conftest: the same checks
and walls, without a torch import of its own; the Ctrl-C test starts afresh, as a student's run does), and runs are
memoised (`mha(...)`) and shared between the tests that only read them; `--only construct` / `--only output-shape` are
used wherever a full run is not needed. The bad student modules live in `tests/bad/` (one small standalone module each).

Tests marked `xfail(strict=True)` assert the correct behaviour for a bug that is known and not fixed yet.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import TEMPLATE_VARIABLE, processes_left

pytestmark = pytest.mark.usefixtures("warm_single_runs")  # see conftest

ROOT = Path(__file__).resolve().parents[2]
BAD = "tests/bad"
BOOK = ROOT / "tests" / "zoo" / "correct" / "book_style.py"  # known correct; its class is MultiHeadAttention
BOOK_SPEC = "tests/zoo/correct/book_style.py:MultiHeadAttention"
CORRECT_EXAMPLE = "examples/correct_attention.py:MultiHeadAttention"
BUGGY_EXAMPLE = "examples/buggy_attention.py:MultiHeadAttention"
STATUSES = {"pass", "fail", "cannot_tell", "skip"}
SHADOW_NAMES = ("checks", "reference", "harness", "mutants")
TIMEOUT = 180

# The same interpreter as the test run.  `python -m` puts the cwd first on sys.path (Python's rule, not the tool's),
# so the tests that put a student's `harness.py` in the cwd run the installed console script, as a student does.
CLI = [sys.executable, "-m", "harness.frontends.cli"]


def console_script() -> str | None:
    beside = Path(sys.executable).with_name("mha-check")
    return str(beside) if beside.exists() else shutil.which("mha-check")


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    rc: int
    stdout: str
    stderr: str

    @property
    def log(self) -> str:  # what an assertion on a run shows when it fails
        return (f"mha-check {' '.join(self.args)} -> exit {self.rc}\n--- stdout ---\n{self.stdout[-4000:]}"
                f"\n--- stderr ---\n{self.stderr[-4000:]}")


_RUNS: dict[tuple, Run] = {}


def mha(*args, cwd: Path | str = ROOT, script: bool = False, fresh: bool = False) -> Run:
    """Run mha-check once with these arguments (memoised unless `fresh`)."""
    args = tuple(str(a) for a in args)
    key = (args, str(cwd), script)
    if fresh or key not in _RUNS:
        if script:
            exe = console_script()
            if exe is None:
                pytest.skip("the mha-check console script is not installed next to this interpreter")
            cmd = [exe, *args]
        else:
            cmd = [*CLI, *args]
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT,
                              env=dict(os.environ, PYTHONIOENCODING="utf-8"))
        _RUNS[key] = Run(args, proc.returncode, proc.stdout, proc.stderr)
    return _RUNS[key]


def no_traceback(run: Run) -> None:
    assert "Traceback" not in run.stderr, run.log
    assert "Traceback" not in run.stdout, run.log


def report(run: Run, rc: int) -> dict:
    """The run's JSON report, after checking the exit status, the absence of tracebacks and the schema."""
    assert run.rc == rc, run.log
    no_traceback(run)
    try:
        data = json.loads(run.stdout)  # exactly one JSON value: json.loads rejects anything after it
    except json.JSONDecodeError as e:
        raise AssertionError(f"stdout is not exactly one JSON object ({e})\n{run.log}") from None
    assert isinstance(data, dict), run.log
    assert isinstance(data["target"], str) and data["target"], run.log
    assert isinstance(data["passed"], bool), run.log
    assert isinstance(data["checks"], list) and data["checks"], run.log
    for c in data["checks"]:
        assert isinstance(c["id"], str) and c["id"], c
        assert c["status"] in STATUSES, c
        assert isinstance(c["message"], str) and c["message"].strip(), c
    assert data["passed"] == all(c["status"] == "pass" for c in data["checks"]), run.log
    assert data["passed"] == (rc == 0), run.log
    return data


def checks_of(data: dict) -> dict[str, dict]:
    return {c["id"]: c for c in data["checks"]}


def ids_of(data: dict) -> list[str]:
    return [c["id"] for c in data["checks"]]


def usage_error(run: Run) -> None:
    assert run.rc == 2, run.log
    no_traceback(run)
    assert "mha-check: error:" in run.stderr, run.log


def status_lines(text: str) -> list[str]:
    """The report's check lines, without their indentation: 'FAIL       construct  ...'."""
    return [line.strip() for line in text.splitlines()
            if line.strip().startswith(("PASS ", "FAIL ", "SKIP ", "CAN'T", "N/A "))]


def load_failure(run: Run, statuses=("fail",)) -> str:
    """A target that cannot be loaded or built: exit 1, a failing `construct` check; returns its message."""
    data = report(run, 1)
    construct = checks_of(data)["construct"]
    assert construct["status"] in statuses, run.log
    assert all(c["status"] == "skip" for c in data["checks"] if c["id"] != "construct"), run.log
    return construct["message"]


def student_module(class_name: str = "MyAttn") -> str:
    """The known-correct module's source, with its class renamed."""
    src = BOOK.read_text()
    assert "class MultiHeadAttention(nn.Module)" in src
    return src.replace("class MultiHeadAttention(nn.Module)", f"class {class_name}(nn.Module)")


@pytest.fixture(scope="module")
def all_ids() -> list[str]:
    run = mha("--list-checks")
    assert run.rc == 0, run.log
    return [line.split()[0] for line in run.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def extras_dir(tmp_path_factory) -> Path:
    """book.py: the correct class plus a factory function and a module-level instance; unusual.py: a constructor
    whose width parameter has a name mha-check cannot guess (`zeta`: no word of a width; `size` is read as one)."""
    d = tmp_path_factory.mktemp("extras")
    (d / "book.py").write_text(BOOK.read_text() + '''

def make_attention(d_model, n_heads, context_length):
    return MultiHeadAttention(d_model, d_model, context_length, 0.0, n_heads)


attention = MultiHeadAttention(4, 4, 8, 0.0, 2)
''')
    src = BOOK.read_text()
    old = ("def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):\n"
           "        super().__init__()\n")
    assert old in src
    (d / "unusual.py").write_text(src.replace(old, old.replace("d_out,", "zeta,") + "        d_out = zeta\n"))
    return d


# -- a correct module ----------------------------------------------------------------------------------------------

def test_correct_module_json_report(all_ids):
    data = report(mha(BOOK_SPEC, "--format", "json"), 0)
    assert data["passed"] is True
    assert data["target"] == BOOK_SPEC
    assert ids_of(data) == all_ids
    assert {c["status"] for c in data["checks"]} == {"pass"}
    if "summary" in data:  # kv-cache has no cache to check: a pass, counted apart from the verified ones
        assert (data["summary"]["pass"], data["summary"]["not_applicable"]) == (len(all_ids) - 1, 1)
        assert [c["id"] for c in data["checks"] if c["not_applicable"]] == ["kv-cache"]


def test_correct_example_text_report(all_ids):
    run = mha(CORRECT_EXAMPLE)
    assert run.rc == 0, run.log
    no_traceback(run)
    assert run.stdout.splitlines()[1].startswith("PASS: the math is correct"), run.log
    for check_id in all_ids:  # kv-cache has no cache to check: marked apart, N/A, not PASS
        mark = "N/A" if check_id == "kv-cache" else "PASS"
        assert any(line.startswith(mark) and check_id in line.split() for line in status_lines(run.stdout)), \
            check_id
    assert "18 passed, 0 failed, 1 does not apply" in run.stdout, run.log


def test_list_checks(all_ids):
    run = mha("--list-checks")
    no_traceback(run)
    assert run.stderr == "", run.log
    assert len(all_ids) == len(set(all_ids)) >= 10
    assert {"construct", "output-shape", "causal-leakage", "reference-match"} <= set(all_ids)
    for line in run.stdout.splitlines():  # each id comes with its claim
        assert len(line.split()) > 3, line


# -- a buggy module, and determinism ---------------------------------------------------------------------------------

def test_buggy_example_fails():
    data = report(mha(BUGGY_EXAMPLE, "--format", "json", "--seed", "3"), 1)
    assert data["passed"] is False
    assert checks_of(data)["construct"]["status"] == "pass"
    failing = [c for c in data["checks"] if c["status"] == "fail"]
    assert failing, data
    for c in failing:  # a failure says what was seen
        assert len(c["message"]) > 20, c


def test_same_seed_gives_identical_verdicts():
    first = report(mha(BUGGY_EXAMPLE, "--format", "json", "--seed", "3"), 1)
    second = report(mha(BUGGY_EXAMPLE, "--format", "json", "--seed", "3", fresh=True), 1)
    assert first.get("seed", 3) == 3
    assert second["checks"] == first["checks"]
    drop = {"student_output", "isolation"}  # the isolation record names the slot's uid and scratch of each run
    assert {k: v for k, v in second.items() if k not in drop} == {k: v for k, v in first.items() if k not in drop}


# -- selecting checks ------------------------------------------------------------------------------------------------

def test_only_repeatable_and_comma_separated_with_skip():
    run = mha(BOOK_SPEC, "--format", "json", "--only", "construct", "--only", "divisibility,param-count",
              "--skip", "param-count")
    data = report(run, 0)
    assert ids_of(data) == ["construct", "divisibility"]


def test_a_partial_run_never_claims_the_whole_verdict(all_ids):
    """--only on buggy code once printed "PASS: the math is correct" after three checks."""
    run = mha(BUGGY_EXAMPLE, "--only", "construct,output-shape")
    assert run.rc == 0 and run.stdout.splitlines()[1].startswith("PASS: the 3 checks run pass;"), run.log
    flat = " ".join(run.stdout.split())
    assert "not the whole verdict" in flat and "the math is correct" not in flat
    data = report(mha(BUGGY_EXAMPLE, "--format", "json", "--only", "construct,output-shape"), 0)
    assert sorted(data["not_selected"]) == sorted(set(all_ids) - {"construct", "contiguity", "output-shape"})


def test_skip_comma_separated(all_ids):
    rest = [i for i in all_ids if i not in ("construct", "output-shape")]
    data = report(mha(BOOK_SPEC, "--format", "json", "--skip", ",".join(rest + ["contiguity"])), 0)
    assert ids_of(data) == ["construct", "contiguity", "output-shape"]  # a prerequisite runs even when skipped


# -- command-line misuse: exit 2, a one-line message, no traceback ---------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (["--no-such-option", BOOK_SPEC], ["--no-such-option"]),
    ([], ["TARGET"]),
    (["--format", "json"], ["TARGET"]),
    (["--only", "nonsense", BOOK_SPEC], ["unknown check id", "nonsense"]),
    (["--skip", "output_shape", "--format", "json", BOOK_SPEC], ["unknown check id", "output-shape"]),
    (["--only", "construct,nope", BOOK_SPEC], ["unknown check id", "nope"]),
    (["--arg", "oops", BOOK_SPEC], ["--arg", "NAME=VALUE"]),
    (["--format", "xml", BOOK_SPEC], ["--format"]),
    (["--seed", "abc", BOOK_SPEC], ["--seed"]),
    (["--examples", "-1", BOOK_SPEC], ["--examples"]),
], ids=["unknown-option", "no-target", "no-target-json", "unknown-only", "misspelt-skip-suggests",
        "unknown-in-comma-list", "malformed-arg", "bad-format", "bad-seed", "negative-examples"])
def test_usage_errors(args, words):
    run = mha(*args)
    usage_error(run)
    assert run.stdout == "", run.log  # not even a partial report (no JSON to misparse)
    for w in words:
        assert w in run.stderr, (w, run.log)


@pytest.mark.parametrize("seed", ["-1", str(2 ** 64)])
def test_out_of_range_seed_is_a_usage_error(seed):
    run = mha(BOOK_SPEC, "--format", "json", "--only", "reference-match", f"--seed={seed}")
    no_traceback(run)
    if run.rc == 2:  # refused: a usage error naming the option
        usage_error(run)
        assert "--seed" in run.stderr, run.log
    else:  # or accepted: then the correct module passes
        assert report(run, 0)["passed"] is True


# -- target forms ----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shadow_dir(tmp_path_factory) -> Path:
    """A student's folder whose checks.py, reference.py, harness.py and mutants.py would break the tool if imported."""
    d = tmp_path_factory.mktemp("shadow")
    for name in SHADOW_NAMES:
        (d / f"{name}.py").write_text('raise RuntimeError("shadowed!")\n')
    (d / "mymod.py").write_text(student_module("MyAttn"))
    return d


def test_module_colon_name_from_cwd_is_not_shadowed_by_student_files(shadow_dir):
    run = mha("mymod:MyAttn", "--format", "json", cwd=shadow_dir, script=True)
    assert "shadowed!" not in run.stderr + run.stdout, run.log
    data = report(run, 0)
    assert data["target"] == "mymod:MyAttn"
    assert "shadowed!" not in data.get("student_output", "")


@pytest.mark.parametrize("name", SHADOW_NAMES)
def test_student_module_named_like_a_tool_package(tmp_path, name):
    for other in SHADOW_NAMES:
        (tmp_path / f"{other}.py").write_text('raise RuntimeError("shadowed!")\n')
    (tmp_path / f"{name}.py").write_text(student_module("MyAttn"))
    run = mha(f"{name}.py:MyAttn", "--format", "json", "--only", "output-shape", cwd=tmp_path, script=True)
    assert "shadowed!" not in run.stderr + run.stdout, run.log
    data = report(run, 0)
    assert ids_of(data) == ["construct", "contiguity", "output-shape"]


HELPER_PACKAGE = "import torch\n\n\ndef causal_mask(n):\n    return torch.triu(torch.ones(n, n, dtype=torch.bool), 1)\n"
WITH_HELPER = (ROOT / "examples" / "correct_attention.py").read_text().replace(
    "import torch\n", "import torch\nfrom reference import causal_mask\n", 1).replace(
    "torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)",
    "causal_mask(context_length)")


@pytest.fixture(scope="module")
def named_like_ours(tmp_path_factory) -> Path:
    """One correct layer under our packages' names (checks.py, reference.py, mutants.py, harness.py) and under its
    own (attention.py); and, in helper/, a student file that imports its own helper package `reference/`."""
    d = tmp_path_factory.mktemp("named_like_ours")
    for name in (*SHADOW_NAMES, "attention"):
        shutil.copy(ROOT / "examples" / "correct_attention.py", d / f"{name}.py")
    assert "causal_mask(context_length)" in WITH_HELPER
    (d / "helper" / "reference").mkdir(parents=True)
    (d / "helper" / "reference" / "__init__.py").write_text(HELPER_PACKAGE)
    (d / "helper" / "student.py").write_text(WITH_HELPER)
    return d


def verdicts(data: dict) -> dict[str, str]:
    return {c["id"]: c["status"] for c in data["checks"]}


@pytest.mark.parametrize("name", SHADOW_NAMES)
def test_a_layer_named_like_our_packages_gets_the_verdicts_of_its_own_name(named_like_ours, name):
    """Each check's verdict is the one the same class gets as attention.py: the file is the student's, loaded as
    theirs (harness.wire.names), never one of our packages and never shadowing them."""
    same = report(mha("attention.py", "--format", "json", cwd=named_like_ours, script=True), 0)
    data = report(mha(f"{name}.py", "--format", "json", cwd=named_like_ours, script=True), 0)
    assert verdicts(data) == verdicts(same) and data["adapter"]["class"] == "MultiHeadAttention", run_log(data)


@pytest.mark.parametrize("name", [n for n in SHADOW_NAMES if n != "harness"])
def test_python_m_in_a_folder_with_a_file_named_like_our_packages(tmp_path, name):
    """`python -m harness.frontends.cli` puts the working folder first on sys.path: a student's checks.py there was
    imported, so run, by the trusted process before the command's first line (a traceback, exit status 1).  (A
    harness.py there is Python's to import before any code of ours: the console script is the way.)"""
    for other in ("checks", "reference", "mutants", "attention"):
        shutil.copy(ROOT / "examples" / "correct_attention.py", tmp_path / f"{other}.py")
    same = report(mha("attention.py", "--format", "json", cwd=tmp_path), 0)
    data = report(mha(f"{name}.py", "--format", "json", cwd=tmp_path), 0)
    assert verdicts(data) == verdicts(same)


@pytest.mark.parametrize(("target", "script"), [("student.py", True), ("student.py", False),
                                                ("student:MultiHeadAttention", True)])
def test_a_students_own_helper_package_named_reference_is_theirs(named_like_ours, target, script):
    """`from reference import causal_mask`, with their own reference/__init__.py beside the file: their helper is
    imported, never ours, and the class gets the verdicts of the same class without a helper."""
    same = report(mha("attention.py", "--format", "json", cwd=named_like_ours, script=True), 0)
    data = report(mha(target, "--format", "json", cwd=named_like_ours / "helper", script=script), 0)
    assert verdicts(data) == verdicts(same)


def run_log(data: dict) -> str:
    return json.dumps({c["id"]: c["message"] for c in data["checks"] if c["status"] != "pass"})[:2000]


def test_file_alone_with_one_class(extras_dir):
    # book.py also holds a factory function and a module-level instance: neither is a class candidate
    data = report(mha("book.py", "--format", "json", "--only", "construct", cwd=extras_dir), 0)
    assert data["adapter"]["construction"].startswith("MultiHeadAttention("), data["adapter"]


def test_file_alone_picks_the_outer_of_nested_classes():
    data = report(mha(f"{BAD}/wrapped_heads.py", "--format", "json", "--only", "construct"), 0)
    assert data["adapter"]["construction"].startswith("MultiHead("), data["adapter"]


def test_file_alone_with_two_unrelated_classes_lists_them():
    msg = load_failure(mha(f"{BAD}/two_unrelated.py", "--format", "json", "--only", "construct"), ("cannot_tell",))
    assert "AttentionA" in msg and "AttentionB" in msg, msg


def test_factory_function(extras_dir):
    data = report(mha("book.py:make_attention", "--format", "json", "--only", "output-shape", cwd=extras_dir), 0)
    assert data["adapter"]["construction"].startswith("make_attention("), data["adapter"]


def test_module_level_instance_is_not_a_factory(extras_dir):
    msg = load_failure(mha("book.py:attention", "--format", "json", "--only", "construct", cwd=extras_dir))
    assert "forward()" not in msg and "module.py" not in msg, msg
    assert "instance" in msg or "not a class" in msg, msg
    assert "MultiHeadAttention" in msg, msg  # the class to name instead


@pytest.mark.parametrize("as_path", [True, False], ids=["path", "bare-name"])
def test_a_notebook_without_the_class_says_so(tmp_path, as_path):
    nb = tmp_path / "attention.ipynb"
    nb.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}\n')
    spec = f"{nb if as_path else nb.name}:MyAttn"
    run = mha(spec, "--format", "json", "--only", "construct", cwd=tmp_path)  # a student's own run: a class name
    usage_error(run)  # the notebook does not define is a command line to correct
    msg = run.stderr
    assert "NoneType" not in msg and "importlib" not in msg and "No module named" not in msg, msg
    assert "_cells" not in msg, msg  # the file written from the notebook is ours: never named
    assert "attention.ipynb" in msg and "MyAttn" in msg, msg


def test_a_file_that_is_neither_python_nor_a_notebook(tmp_path):
    (tmp_path / "attention.txt").write_text("class MyAttn: pass\n")
    msg = load_failure(mha("attention.txt:MyAttn", "--format", "json", "--only", "construct", cwd=tmp_path))
    assert "attention.txt is neither a Python file (.py) nor a notebook (.ipynb)" in msg, msg


def test_misspelt_class_name_suggests_the_right_one():
    """A student's own run: a command line to correct, in one line (a student's trial got the suggestion, then a
    failing report of eighteen skipped checks under it)."""
    run = mha("tests/zoo/correct/book_style.py:MultiHeadAtention", "--only", "construct")
    usage_error(run)
    assert run.stdout == "", run.log
    msg = run.stderr.strip()
    assert len(msg.splitlines()) == 1, run.log
    assert "MultiHeadAtention" in msg and "Did you mean" in msg and "MultiHeadAttention" in msg, msg


def test_misspelt_class_name_in_a_grade_is_the_submissions_failure():
    msg = load_failure(mha("tests/zoo/correct/book_style.py:MultiHeadAtention", "--format", "json",
                           "--only", "construct", "--grading", "--seed", "0"))
    assert "MultiHeadAtention" in msg and "Did you mean" in msg and "MultiHeadAttention" in msg, msg


def test_misspelt_file_name_is_a_command_line_error_with_the_close_name(tmp_path):
    """A student's trial: `mha-check f01_functonal.py:FuncAttn` was "FAIL: your file could not be loaded", exit 1,
    18 SKIP lines and grading words; it is one line, exit 2, and the name meant, as it can be typed."""
    (tmp_path / "f01_functional.py").write_text(student_module("FuncAttn"))
    for i in range(8):
        (tmp_path / f"other_{i}.py").write_text("x = 1\n")
    run = mha("f01_functonal.py:FuncAttn", cwd=tmp_path)
    usage_error(run)
    assert run.stdout == "" and len(run.stderr.strip().splitlines()) == 1, run.log
    assert "did you mean f01_functional.py:FuncAttn?" in run.stderr, run.log
    assert "Hand in" not in run.stderr, run.log
    far = mha("zzzz.py:FuncAttn", cwd=tmp_path)  # no close name: the folder's files, the list cut with "…"
    usage_error(far)
    assert "no such file: zzzz.py (that folder has f01_functional.py, other_0.py" in far.stderr, far.log
    assert far.stderr.rstrip().endswith("…)"), far.log
    trace_run = subprocess.run([*CLI, "trace", "f01_functonal.py:FuncAttn"], cwd=tmp_path, capture_output=True,
                               text=True, timeout=TIMEOUT)
    assert trace_run.returncode == 2 and "did you mean f01_functional.py:FuncAttn?" in trace_run.stderr, \
        trace_run.stderr


def test_a_folder_as_the_target_lists_the_targets_as_typed(tmp_path):
    """A student's trial: `mha-check ./` said "17 defines no torch.nn.Module subclass; ... e.g. 17:make_attention",
    17 being the folder's name."""
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "attn.py").write_text(student_module("MyAttn"))
    (tmp_path / "lab" / "notes.ipynb").write_text("{}")
    for target, cwd, typed in (("./", tmp_path / "lab", "attn.py:MyAttn"), ("lab", tmp_path, "lab/attn.py:MyAttn")):
        run = mha(target, cwd=cwd)
        usage_error(run)
        assert "is a folder: give the file and the class, FILE.py:Class" in run.stderr, run.log
        assert f"e.g. {typed}, " in run.stderr and "notes.ipynb" in run.stderr, run.log


def test_missing_file_in_a_grade_is_the_submissions_failure():
    msg = load_failure(mha(f"{BAD}/no_such_file.py:MyAttn", "--format", "json", "--only", "construct", "--grading",
                           "--seed", "0"))
    assert "no_such_file.py" in msg, msg


@pytest.mark.parametrize("spec, words", [
    (f"{BAD}/no_such_file.py:MyAttn", ["no_such_file.py"]),
    ("no_such_module_xyz:MyAttn", ["no_such_module_xyz"]),
], ids=["missing-file", "missing-module"])
def test_missing_file_or_module(spec, words):
    run = mha(spec, "--format", "json", "--only", "construct")
    if spec.endswith(".py:MyAttn"):  # a student's own run: a file that is not there is a command line to correct
        usage_error(run)
        msg = run.stderr
    else:
        msg = load_failure(run)
    for w in words:
        assert w in msg, msg


# -- broken student code: exit 1 with the words the student needs, never a crash of the tool -------------------------

def test_syntax_error_text_report():
    run = mha(f"{BAD}/syntax_error.py:MyAttn", "--only", "construct")
    assert run.rc == 1, run.log
    no_traceback(run)
    fail_lines = [line for line in status_lines(run.stdout) if line.startswith("FAIL")]
    assert fail_lines and "construct" in fail_lines[0], run.log
    assert "SyntaxError" in run.stdout and "line 9" in run.stdout, run.log


def test_syntax_error_json_report():
    msg = load_failure(mha(f"{BAD}/syntax_error.py:MyAttn", "--format", "json", "--only", "construct"))
    assert "SyntaxError" in msg and "line 9" in msg, msg


def test_import_error():
    msg = load_failure(mha(f"{BAD}/import_error.py:MyAttn", "--format", "json", "--only", "construct"))
    assert "ModuleNotFoundError" in msg and "attention_helpers_that_do_not_exist" in msg, msg


def test_class_that_is_not_an_nn_module():
    msg = load_failure(mha(f"{BAD}/not_a_module.py:PlainAttention", "--format", "json", "--only", "construct"))
    assert "not a torch.nn.Module" in msg, msg


def test_module_level_variable_is_not_a_target():
    msg = load_failure(mha(f"{BAD}/not_a_module.py:WIDTH", "--format", "json", "--only", "construct"))
    assert "WIDTH" in msg and "not a class" in msg, msg


def test_file_alone_without_any_nn_module():
    msg = load_failure(mha(f"{BAD}/not_a_module.py", "--format", "json", "--only", "construct"))
    assert "nn.Module" in msg, msg


def _ctor_raises_text() -> Run:
    return mha(f"{BAD}/ctor_raises.py:MyAttn", "--only", "construct")


def test_constructor_that_raises():
    run = _ctor_raises_text()
    assert run.rc == 1, run.log
    no_traceback(run)
    assert any(line.startswith("FAIL") and "construct" in line for line in status_lines(run.stdout)), run.log
    # the exception type and the student's own line, not ours
    assert "ZeroDivisionError" in run.stdout and "ctor_raises.py:8" in run.stdout, run.log


def test_failed_construction_is_not_reported_as_built():
    run = _ctor_raises_text()
    assert run.rc == 1, run.log
    assert "built as" not in run.stdout, run.log


@pytest.mark.parametrize("module_name, words, statuses", [
    ("exit_at_import", ["SystemExit"], ("fail",)),  # an exception the child catches
    ("os_exit_at_import", ["status 3"], ("fail", "error")),  # no exception: the child just dies while loading
])
def test_exit_at_import(module_name, words, statuses):
    msg = load_failure(mha(f"{BAD}/{module_name}.py:MyAttn", "--format", "json", "--only", "construct"), statuses)
    for w in words:
        assert w in msg, msg


@pytest.mark.parametrize("module_name, words", [
    ("wrong_type", ["dict", "not a tensor"]),
    ("wrong_shape", ["shape", "expected"]),
    ("nan_output", ["NaN"]),
])
def test_bad_forward_output(module_name, words):
    data = report(mha(f"{BAD}/{module_name}.py:MyAttn", "--format", "json", "--only", "output-shape"), 1)
    assert ids_of(data) == ["construct", "contiguity", "output-shape"]  # the prerequisites run too
    checks = checks_of(data)
    assert checks["construct"]["status"] == "pass"
    assert checks["output-shape"]["status"] == "fail"
    for w in words:
        assert w in checks["output-shape"]["message"], checks["output-shape"]


def os_exit_report() -> dict:
    return report(mha(f"{BAD}/os_exit_forward.py:MyAttn", "--format", "json"), 1)


def test_child_killed_in_forward_remaining_checks_still_run(all_ids):
    data = os_exit_report()
    assert ids_of(data) == all_ids
    checks = checks_of(data)
    assert checks["construct"]["status"] == "pass"
    assert checks["contiguity"]["status"] == "fail"  # the first check that runs forward reports the death, once
    msg = checks["contiguity"]["message"]
    assert "status 3" in msg and "forward" in msg, msg  # the exit status, and where it happened
    assert checks["output-shape"]["status"] == "skip"
    assert "during build" not in msg, msg  # not blamed on the constructor
    # checks that only build the module ran, on a restarted child, after the first death, with true verdicts:
    # MyAttn accepts d_out=8 with 3 heads (a dead child would make every build "raise", i.e. refuse it)
    assert checks["divisibility"]["status"] == "fail", checks["divisibility"]
    assert checks["head-invariance"]["status"] == "pass", checks["head-invariance"]
    # what needs a working forward is skipped, never passed
    for check_id in ("causal-leakage", "reference-match", "gradient-match", "batch-independence",
                     "eval-determinism", "input-untouched"):
        assert checks[check_id]["status"] in ("fail", "skip"), checks[check_id]


# -- a student module that prints ------------------------------------------------------------------------------------

PRINTED = ("hello from the student's module", "raw bytes on fd 1", "forward called with")


def test_prints_do_not_reach_json_stdout():
    run = mha(f"{BAD}/prints.py:MyAttn", "--format", "json")
    data = report(run, 0)  # the module is correct: its chatter must not change the verdict or break the JSON
    rest = json.dumps({k: v for k, v in data.items() if k != "student_output"})
    for text in PRINTED:
        assert text not in rest, run.log
    assert "forward called with" in data.get("student_output", ""), data.get("student_output")


def test_prints_do_not_reach_text_stdout():
    run = mha(f"{BAD}/prints.py:MyAttn", "--only", "output-shape")
    assert run.rc == 0, run.log
    no_traceback(run)
    for text in PRINTED:
        assert text not in run.stdout, run.log


# -- constructor overrides -------------------------------------------------------------------------------------------

def test_unknown_constructor_parameter_asks_for_arg(extras_dir):
    msg = load_failure(mha("unusual.py:MultiHeadAttention", "--format", "json", "--only", "construct",
                           cwd=extras_dir), ("cannot_tell",))  # mha-check's limit, not the student's failure
    assert "zeta" in msg and "--arg" in msg, msg


def test_arg_binds_a_parameter_to_the_width(extras_dir):
    data = report(mha("unusual.py:MultiHeadAttention", "--format", "json", "--arg", "zeta=@d_out", cwd=extras_dir), 0)
    assert "zeta=8" in data["adapter"]["construction"], data["adapter"]


def test_the_commands_a_report_prints_carry_the_runs_arg_and_map(tmp_path):
    """A student's trial: `see also: mha-check trace f08_deutsch.py:KausaleAufmerksamkeit`, copied, failed for want
    of the three --arg the run had needed ("built as KausaleAufmerksamkeit()", then "ERROR: adapter: mha-check has no
    value for required parameter(s)").  The commands carry the run's --arg and --map, shell-quoted, and work; the
    trace says "built as" only of a build that happened; construct's pass names the --arg it built with."""
    src = BOOK.read_text()
    old = "def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):\n"
    assert old in src and "dim=-1)" in src
    src = src.replace(old, "def __init__(self, d_in, zeta, context_length, dropout, num_heads, qkv_bias=False, "
                           "label=None):\n        d_out = zeta\n").replace("dim=-1)", "dim=-2)")  # softmax-wrong-axis
    (tmp_path / "odd.py").write_text(src)
    args = ("--arg", "zeta=@d_out", "--arg", "label=two words", "--map", "q=W_query")
    run = mha("odd.py:MultiHeadAttention", *args, "-v", cwd=tmp_path)
    assert run.rc == 1, run.log
    words = " --arg zeta=@d_out --arg 'label=two words' --map q=W_query"
    command = f"mha-check trace odd.py:MultiHeadAttention{words}"
    assert command + ":" in run.stdout.replace("\u00a0", " "), run.log
    assert "zeta=the output width (--arg), label='two words' (--arg)" in " ".join(run.stdout.split()), run.log
    traced = subprocess.run([*CLI, *shlex.split(command)[1:], "--wide"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=TIMEOUT)
    assert traced.returncode == 1 and "MISTAKE" in traced.stdout, traced.stdout + traced.stderr
    assert "built as MultiHeadAttention(" in traced.stdout, traced.stdout
    assert f"(run `mha-check odd.py:MultiHeadAttention{words}` for the full checks" in traced.stdout, traced.stdout
    bare = subprocess.run([*CLI, "trace", "odd.py:MultiHeadAttention"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert bare.returncode == 1 and "no value for required parameter(s) zeta" in bare.stdout, bare.stdout
    assert "built as" not in bare.stdout, bare.stdout


def test_a_notebook_exported_to_python_is_sent_to_the_notebook(tmp_path):
    """A student's trial: a notebook exported to .py stopped at `get_ipython()` and was "FAIL: your code raised
    NameError".  On a student's own run it cannot tell (the layer was never reached: IPython's code runs only in
    Jupyter) and names the notebook beside it as a target; in a grade the submission does not import: it fails."""
    (tmp_path / "lab.ipynb").write_text("{}")
    (tmp_path / "lab_export.py").write_text("get_ipython().run_line_magic('matplotlib', 'inline')\n" +
                                            student_module("MyAttn"))
    data = report(mha("lab_export.py:MyAttn", "--format", "json", "--only", "construct", cwd=tmp_path), 1)
    construct = checks_of(data)["construct"]
    assert construct["status"] == "cannot_tell", construct
    assert "notebook exported to Python" in construct["message"] and "get_ipython" in construct["message"], construct
    assert "`mha-check lab.ipynb:MyAttn`" in construct["help"], construct
    graded = load_failure(mha("lab_export.py:MyAttn", "--format", "json", "--only", "construct", "--grading",
                              "--seed", "0", cwd=tmp_path))
    assert "get_ipython" in graded, graded


def test_a_data_file_read_by_a_relative_path_at_import_is_named_with_where_it_was_looked_for(tmp_path):
    """A student's trial: `open("the-verdict.txt")` at import, the file beside the folder the student ran from (as
    `python misuse/lab.py` reads it) but not beside the .py file: "FileNotFoundError: 2, No such file or directory",
    a failure, its name lost.  mha-check runs the file in a copy of its own folder (the walls show the child nothing
    else): a student's own run cannot tell and says so, with the file's name; where the file is nowhere, it fails,
    still saying where it was looked for."""
    (tmp_path / "misuse").mkdir()
    (tmp_path / "misuse" / "lab.py").write_text(student_module("MyAttn") + '\nwith open("the-verdict.txt") as f:\n'
                                                '    text = f.read()\n')
    (tmp_path / "the-verdict.txt").write_text("I HAD always thought Jack Gisburn rather a cheap genius\n")
    data = report(mha("misuse/lab.py:MyAttn", "--format", "json", "--only", "construct", cwd=tmp_path), 1)
    construct = checks_of(data)["construct"]
    assert construct["status"] == "cannot_tell", construct
    for words in ("'the-verdict.txt'", "a copy of its own folder (misuse/)", "the folder you ran mha-check from"):
        assert words in construct["message"], construct
    assert "__main__" in construct["help"], construct
    alone = load_failure(mha("lab.py:MyAttn", "--format", "json", "--only", "construct", cwd=tmp_path / "misuse"))
    assert "No such file or directory: 'the-verdict.txt'" in alone and "relative path" in alone, alone


def test_nothing_is_left_in_the_students_folder(tmp_path):
    """No .hypothesis, no __pycache__, no scratch: the student's folder holds what it held."""
    (tmp_path / "attn.py").write_text(student_module("MyAttn"))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    run = mha("attn.py:MyAttn", "--only", "view-order", cwd=tmp_path, fresh=True)
    assert run.rc == 0, run.log
    assert sorted(p.name for p in tmp_path.rglob("*")) == before



def test_a_long_printed_output_is_cut_with_a_line_that_says_how_much(tmp_path):
    """Only the end of what the code printed is kept (8000 bytes); the report says how much there was in all."""
    shutil.copy(ROOT / "examples" / "correct_attention.py", tmp_path / "correct_attention.py")
    (tmp_path / "loud.py").write_text("from correct_attention import MultiHeadAttention as Base\n\n\n"
                                      "class Loud(Base):\n    def forward(self, x):\n        print('x' * 5000)\n"
                                      "        return super().forward(x)\n")
    data = report(mha("loud.py:Loud", "--only", "output-shape", "--format", "json", cwd=tmp_path), 0)
    first, rest = data["student_output"].split("\n", 1)
    assert first.startswith("[mha-check kept the last 8000 of ") and len(rest) <= 8000
    text = mha("loud.py:Loud", "--only", "output-shape", cwd=tmp_path).stdout
    assert re.search(r"your code printed \d{5,} bytes", text), text


def test_mha_checks_own_packages_are_not_for_submissions(tmp_path):
    """A class that subclasses mha-check's reference does not load (its answer key is not importable from a
    submission), while a student's own helper named like one of our packages is theirs (it once scored 0)."""
    cheat = tmp_path / "cheat"
    cheat.mkdir()
    (cheat / "attention.py").write_text("from reference.causal_mha import CausalMHA\n\n\n"
                                        "class MyAttn(CausalMHA):\n    pass\n")
    data = report(mha("attention.py:MyAttn", "--format", "json", cwd=cheat), 1)
    assert "No module named 'reference' in your submission" in checks_of(data)["construct"]["message"]
    honest = tmp_path / "honest"
    honest.mkdir()
    (honest / "reference.py").write_text("import torch\n\n\ndef causal_mask(n):\n"
                                         "    return torch.triu(torch.ones(n, n, dtype=torch.bool), 1)\n")
    (honest / "attention.py").write_text((ROOT / "examples" / "correct_attention.py").read_text().replace(
        "import torch\n", "import torch\nfrom reference import causal_mask\n", 1))
    assert report(mha("attention.py", "--format", "json", cwd=honest), 0)["passed"] is True


def test_printing_past_the_output_limit_is_our_limit_not_a_bug(tmp_path):
    """20 MB printed in forward hits the 16 MB file-size limit: cannot tell, needs review, and the help says to
    print less (it was once a failing check with an OSError and a fix about NaN)."""
    shutil.copy(ROOT / "examples" / "correct_attention.py", tmp_path / "correct_attention.py")
    (tmp_path / "loud.py").write_text("from correct_attention import MultiHeadAttention as Base\n\n\n"
                                      "class Loud(Base):\n    def forward(self, x):\n"
                                      "        for _ in range(20000):\n            print('x' * 1000)\n"
                                      "        return super().forward(x)\n")
    data = report(mha("loud.py:Loud", "--format", "json", cwd=tmp_path), 1)
    undecided = [c for c in data["checks"] if c["status"] == "cannot_tell"]
    assert undecided and "output limit" in undecided[0]["message"] and "print less" in undecided[0]["help"]
    assert data["needs_review"] is True and not [c for c in data["checks"] if c["status"] == "fail"]


def test_the_root_cause_points_into_the_class_a_factory_wraps(tmp_path):
    """A factory in one file wrapping a class from its neighbour: the line that matters is in the class's file (it
    once pointed at the wrapper's call)."""
    shutil.copy(ROOT / "examples" / "buggy_attention.py", tmp_path / "impl.py")
    (tmp_path / "factory.py").write_text(
        "import torch.nn as nn\nfrom impl import MultiHeadAttention\n\n\n"
        "class Wrapped(nn.Module):\n"
        "    def __init__(self, d, heads, context_length):\n"
        "        super().__init__()\n"
        "        self.inner = MultiHeadAttention(d, d, context_length, 0.0, heads)\n\n"
        "    def forward(self, x):\n"
        "        return self.inner(x)\n\n\n"
        "def make(d, heads, context_length):\n"
        "    return Wrapped(d, heads, context_length)\n")
    data = report(mha("factory.py:make", "--format", "json", cwd=tmp_path), 1)
    assert data["diagnosis"]["mutant"] == "split-view-order"
    assert data["diagnosis"]["at"].startswith("impl.py:"), data["diagnosis"]


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_in_a_single_run_stops_it_cleanly(tmp_path, stop):
    """Ctrl-C while the student's forward runs: "interrupted", exit status 130, no traceback, and nothing of the
    run left: its child is killed and its scratch folder removed.  SIGTERM (`timeout`, a scheduler) alike: it left the
    scratch folder, a copy of the submission, behind (found by an attacker's trial).  A fresh start, as a student's (no
    warm template: the run's processes are found by this test's folder in their environment).  The signal is sent once
    forward has begun (it leaves a file in its scratch folder first), not after a fixed sleep, which on a loaded
    machine could land while the child was still starting and test an interrupted start-up instead."""
    code = BOOK.read_text().replace(
        "    def forward(self, x):\n", "    def forward(self, x):\n        import time\n"
        "        open('forward-began', 'w').close()\n        time.sleep(3600)\n", 1)
    (tmp_path / "attention.py").write_text(code)
    (tmp_path / "tmp").mkdir()
    run = subprocess.Popen([*CLI, f"{tmp_path}/attention.py", "--time-limit", "600"], cwd=ROOT,
                           env={**{k: v for k, v in os.environ.items() if k != TEMPLATE_VARIABLE},
                                "TMPDIR": str(tmp_path / "tmp")}, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True,
                           preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 300
    while not list((tmp_path / "tmp").glob("mha-check-*/scratch/forward-began")) and run.poll() is None and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    if run.poll() is not None or not list((tmp_path / "tmp").glob("mha-check-*/scratch/forward-began")):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)
        _, err = run.communicate(timeout=60)
        raise AssertionError(f"the student's forward never began: {err[-2000:]}")
    os.killpg(run.pid, stop)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 130 and "interrupted" in err and "Traceback" not in err, err[-2000:]
    assert processes_left(tmp_path) == []
    assert list((tmp_path / "tmp").iterdir()) == []


def test_an_arg_nearly_spelling_a_parameter_is_a_command_line_to_correct(tmp_path):
    """Student trials 18 and 19: `--arg Width=@d_out` for `width` read "CANNOT TELL: mha-check could not build your
    class", 18 skipped checks, exit status 1, the "did you mean" buried.  On a student's run (and a trace) it is a
    command line to correct: exit 2, one line, the parameter it nearly spells.  Read from the file's syntax tree:
    nothing of it runs before the child does."""
    src = BOOK.read_text()
    (tmp_path / "book.py").write_text(src)
    for command in ((), ("trace",)):
        run = mha(*command, "book.py:MultiHeadAttention", "--arg", "Num_heads=@heads", cwd=tmp_path)
        assert run.rc == 2, run.log
        assert "--arg Num_heads: MultiHeadAttention's constructor has no parameter Num_heads" in run.stderr, run.log
        assert "did you mean --arg num_heads=...?" in run.stderr, run.log
    ok = mha("book.py:MultiHeadAttention", "--arg", "num_heads=@heads", "--only", "construct", cwd=tmp_path)
    assert ok.rc == 0, ok.log
