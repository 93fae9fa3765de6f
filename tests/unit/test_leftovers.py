"""The session check of tests/leftovers.py, on a session of its own: one that leaves a process behind fails and
names it (and the process is gone afterwards); one that leaves nothing passes."""
import os
import subprocess
import sys
import time

import pytest

import leftovers
from conftest import ROOT
from harness.sandbox import policy

LEAVES = '''
import subprocess

def test_starts_a_process_that_outlives_it():
    subprocess.run(["sh", "-c", "sleep {name} &"], check=True)  # orphaned at once: not our child
'''
CLEAN = '''
import subprocess

def test_starts_and_waits():
    subprocess.run(["sleep", "0.1"], check=True)
'''


def _session(tmp_path, body: str):
    (tmp_path / "test_inner.py").write_text(body)
    env = {k: v for k, v in os.environ.items() if k != "MHA_CHECK_TEST_SESSION"}
    env.update(PYTHONPATH=os.pathsep.join([str(ROOT / "tests"), str(ROOT)]), MHA_CHECK_LEFTOVER_GRACE="2")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "leftovers",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def _running(name: str) -> bool:
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f.read() == b"sleep\0" + name.encode() + b"\0":
                    return True
        except OSError:
            continue
    return False


def test_a_session_that_leaves_a_process_fails_and_names_it(tmp_path):
    name = f"{300 + os.getpid() % 1000 / 1000:.3f}"  # seconds of a sleep no other process runs
    run = _session(tmp_path, LEAVES.replace("{name}", name))
    assert run.returncode == 1, run.stdout[-2000:] + run.stderr[-2000:]
    assert "1 passed" in run.stdout and "outlived the test session" in run.stdout and name in run.stdout
    deadline = time.monotonic() + 10  # SIGKILLed as it was named: gone at once when idle, later on a loaded machine
    while _running(name) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(name)  # killed once named: the machine is left clean


def test_a_session_that_leaves_nothing_passes(tmp_path):
    run = _session(tmp_path, CLEAN)
    assert run.returncode == 0 and "outlived" not in run.stdout, run.stdout[-2000:] + run.stderr[-2000:]


def test_a_process_started_under_another_session_is_not_this_sessions_leftover():
    """A suite run from inside another (the test above) took a concurrent `grade`'s template, a slot-uid process the
    outer suite had started, for a leftover of its own (CI rehearsal, 2026-12-05).  Its ancestor carries the outer
    session's token; an orphan's does not."""
    outer = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen(['sleep', '30']); "
                              "print(p.pid, flush=True); sys.stdin.read(); p.kill()"],
                             env={**os.environ, leftovers.SUITE_VARIABLE: "outer-session"},
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        child = int(outer.stdout.readline())
        assert leftovers._another_sessions(child, "inner-session")
        assert not leftovers._another_sessions(child, "outer-session")
    finally:
        outer.communicate("")
    orphan = subprocess.run(["sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True,
                            env={k: v for k, v in os.environ.items() if k != leftovers.SUITE_VARIABLE})
    pid = int(orphan.stdout)
    try:
        time.sleep(0.2)  # reparented to init (or to the nearest subreaper, which is of this session)
        assert not leftovers._another_sessions(pid, os.environ.get(leftovers.SUITE_VARIABLE, "this-session"))
    finally:
        os.kill(pid, 9)



MINE, OTHER = b"MHA_CHECK_TEST_SESSION=mine", b"MHA_CHECK_TEST_SESSION=other"
SLOT, ROOT_UID, USER = policy.UID_BASE + 990, 0, 1000


@pytest.mark.parametrize("chain, another", [
    ([(ROOT_UID, []), (ROOT_UID, [])], True),  # under a live run of no session (a student's trial's `mha-check`
    # beside a CI rehearsal, 2026-12-06): another run's
    ([(USER, [])], True),  # an ordinary user's run alike
    ([(SLOT, [])], False),  # orphaned through slot-uid processes only: the suite's
    ([], False),  # reparented to init at once: the suite's
    ([(ROOT_UID, []), (ROOT_UID, [MINE])], False),  # under the suite's own processes (a sandbox's scrubbed one too)
    ([(ROOT_UID, [OTHER])], True),  # under another test session's
    ([(ROOT_UID, []), None], False),  # an ancestor unreadable: counted, as before
])
def test_a_slot_process_is_another_runs_only_by_its_ancestors(chain, another):
    assert policy.is_slot_uid(SLOT)
    assert leftovers.another_run(chain, MINE) is another
