"""The suite leaves nothing running: a session-level check (issue 29's "a session check for leftover processes").

What a test run may leave behind is of two kinds: our own processes (a `grade` stuck in an exit handler, a template,
a zygote), which inherit `SUITE_VARIABLE` from the session, and a submission's processes that outlived their check,
which run as a slot uid (`harness.sandbox.policy`) with an environment of ours scrubbed away.  At the end of the
session, once the session's own workers have exited, each kind is looked for; what is still there after `GRACE`
seconds fails the run with its pid and command line, and our own are killed.  A slot-uid process counts only if it
started after the session, lived through the whole grace period and is not another run's (`_another_sessions`: under
another session's token, or under a live process of no session), so that a concurrent mha-check run's child on the
same machine is not taken for ours.
"""
from __future__ import annotations

import os
import secrets
import signal
import sys
import time
from dataclasses import dataclass

import pytest

from harness.sandbox.policy import is_slot_uid

SUITE_VARIABLE = "MHA_CHECK_TEST_SESSION"
GRACE = 20.0


def mark_session(controller: bool) -> str:
    """The token every process started by the suite inherits: a new one for a session's controller (a suite run
    from inside another has its own), the controller's in an xdist worker."""
    if controller or SUITE_VARIABLE not in os.environ:
        os.environ[SUITE_VARIABLE] = secrets.token_hex(8)
    return os.environ[SUITE_VARIABLE]


def _stat(pid: int | str) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()  # [0] state, [1] ppid, [19] start time in ticks after boot


def session_start() -> int:
    return int(_stat(os.getpid())[19])


def _family() -> set[int]:
    """This process, its ancestors and its descendants (xdist workers still shutting down): not leftovers."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(_stat(entry)[1])
            except (OSError, ValueError, IndexError):
                continue
    descendants, grew = {os.getpid()}, True
    while grew:
        children = {p for p, parent in parents.items() if parent in descendants and p not in descendants}
        descendants |= children
        grew = bool(children)
    return descendants | _ours_and_ancestors()  # (an ancestor's other children, the shell's pipe, are not ours)


@dataclass(frozen=True)
class Leftover:
    pid: int
    uid: int
    ours: bool  # carries the session's token: started by the suite, for certain
    command: str

    def __str__(self) -> str:
        return f"pid {self.pid} (uid {self.uid}{', ours' if self.ours else ''}): {self.command or '?'}"


def _scan(token: str, since: int, exclude: set[int]) -> dict[int, Leftover]:
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                ours = f"{SUITE_VARIABLE}={token}".encode() in f.read()
            uid = os.stat(f"/proc/{entry}").st_uid
            late = int(_stat(entry)[19]) >= since
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:200]
        except (OSError, ValueError, IndexError):
            continue
        if ours or (late and is_slot_uid(uid) and not _another_sessions(int(entry), token)):
            found[int(entry)] = Leftover(int(entry), uid, ours, command)
    return found


def _another_sessions(pid: int, token: str) -> bool:
    """A slot-uid process (its environment scrubbed: no token) that another run started (`another_run`, on its
    ancestors read from /proc)."""
    return another_run(_ancestors(pid), f"{SUITE_VARIABLE}={token}".encode())


def another_run(chain, mine: bytes) -> bool:
    """Whether the ancestors `chain` ((uid, the session tokens in its environment) each, nearest first, up to but not
    including init; None where one could not be read) make a slot-uid process another run's: its nearest ancestor
    with a session's token carries another session's (a test session run beside or around this one), or it has no
    such ancestor and descends, through a live process of no slot uid, from no session at all (an ordinary
    `mha-check` run on the same machine).  A suite run from inside another (tests/unit/test_leftovers.py) took the
    template of a `grade` the outer suite ran meanwhile for its own leftover (CI rehearsal, 2026-12-05), and a
    student's trial's `mha-check` child, run beside a rehearsal, for one too (2026-12-06).  A leftover of this
    session's is orphaned (reparented to init, through slot-uid processes only) or under its own processes."""
    outside = False  # a live process of no slot uid and no token met on the way up: not an orphan's chain
    for link in chain:
        if link is None:  # unreadable: counted as ours, as before
            return False
        uid, tokens = link
        if tokens:
            return tokens[0] != mine
        outside = outside or not is_slot_uid(uid)
    return outside


def _ancestors(pid: int):
    """(uid, session tokens) of each ancestor of `pid`, nearest first, up to init (at most 64); None for one that
    could not be read, after which nothing more is read."""
    for _ in range(64):
        try:
            pid = int(_stat(pid)[1])
            if pid <= 1:
                return
            uid = os.stat(f"/proc/{pid}").st_uid
            with open(f"/proc/{pid}/environ", "rb") as f:
                tokens = [v for v in f.read().split(b"\0") if v.startswith(SUITE_VARIABLE.encode() + b"=")]
        except (OSError, ValueError, IndexError):
            yield None
            return
        yield uid, tokens


def left_behind(token: str, since: int, grace: float = GRACE) -> list[Leftover]:
    """The session's processes alive throughout `grace` seconds after its own workers exited (ours then killed)."""
    deadline = time.monotonic() + grace
    while len(_family()) > len(_ours_and_ancestors()) and time.monotonic() < deadline:
        time.sleep(0.2)  # xdist workers finishing: their orphans show once they are gone
    exclude = _family()
    alive = _scan(token, since, exclude)
    deadline = time.monotonic() + grace
    while alive and time.monotonic() < deadline:
        time.sleep(0.5)
        now = _scan(token, since, exclude)
        alive = {pid: p for pid, p in alive.items() if pid in now}
    for p in alive.values():
        if p.ours:
            try:
                os.kill(p.pid, signal.SIGKILL)
            except OSError:
                pass
    return sorted(alive.values(), key=lambda p: p.pid)


def _ours_and_ancestors() -> set[int]:
    pids, pid = set(), os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            pid = int(_stat(pid)[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


# --- as a pytest plugin (tests/conftest.py imports it; `-p leftovers` elsewhere) ---
_SESSION_START = pytest.StashKey[int]()


def pytest_configure(config):
    controller = not hasattr(config, "workerinput")
    mark_session(controller)
    if controller:
        config.stash[_SESSION_START] = session_start()


@pytest.hookimpl(trylast=True)  # after conftest's own sessionfinish has closed the warm template and the reports
def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput") or _SESSION_START not in session.config.stash:
        return
    grace = float(os.environ.get("MHA_CHECK_LEFTOVER_GRACE", GRACE))
    left = left_behind(os.environ[SUITE_VARIABLE], session.config.stash[_SESSION_START], grace)
    if left:  # a suite that leaves a process behind is a bug, whatever its tests said
        lines = [f"{len(left)} process(es) outlived the test session (tests/leftovers.py):"] + [f"  {p}" for p in left]
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("\n".join(lines), red=True, bold=True)
        else:
            print("\n".join(lines), file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
