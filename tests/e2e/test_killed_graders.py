"""A grader killed outright (SIGKILL: the OOM killer, `kill -9`, a job scheduler) cannot remove what it made: each
child's scratch, a tmpfs of its own where root may mount, with a copy of a student's code.  On a grading machine that
lives for a semester they piled up (mounts, their memory, folders).  The next start of a grade or a single run sweeps
them (harness.sandbox.stale), says so in one line, and never touches the scratch of a grader still running beside it.
Each run here has a TMPDIR of its own: what it leaves, and what the next start sweeps, is the test's alone."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from conftest import ROOT, ZOO, processes_left

CORRECT = ZOO / "correct" / "book_style.py"
SLEEPS_AT_IMPORT = "import time\ntime.sleep(300)\n"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="only root mounts a scratch")


@pytest.fixture
def tmp(tmp_path):
    """The runs' temp dir: one the slots' uids may pass through (pytest's own is closed to them)."""
    folder = Path(tempfile.mkdtemp(prefix="killed-graders-"))
    folder.chmod(0o711)
    yield folder
    subprocess.run([sys.executable, "-c", "import sys; from harness.sandbox import scratch; "
                    "scratch.remove_tree(sys.argv[1])", str(folder)], cwd=ROOT, check=False)


def _mha(tmp: Path, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "harness.frontends.cli", *args], cwd=ROOT,
                            env=dict(os.environ, TMPDIR=str(tmp)), **popen)


def _mounts(tmp: Path) -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return sorted(line.split()[4] for line in f if line.split()[4].startswith(f"{tmp}/"))


def _until(what, seconds: float = 180):
    deadline = time.monotonic() + seconds
    while not (found := what()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def _slow(folder: Path) -> Path:
    """The correct layer, after 300 s of sleep at import: its run is mid-grading, its scratch mounted, for as long
    as the test needs."""
    folder.mkdir(parents=True)
    (folder / "attention.py").write_text(SLEEPS_AT_IMPORT + CORRECT.read_text())
    return folder / "attention.py"


def test_a_killed_single_runs_tmpfs_is_swept_at_the_next_start_and_a_live_runs_is_not(tmp, tmp_path):
    """A single run killed mid-check leaves its tmpfs mounted.  The next run's start unmounts and removes it and says
    so in one line; while that run is mid-check, a third run comes and goes beside it and sweeps nothing: the live
    run keeps its scratch and ends as ever (SIGTERM: it removes its own)."""
    killed = _mha(tmp, str(_slow(tmp_path / "killed")), "--format", "json", stdout=subprocess.DEVNULL,
                  stderr=subprocess.DEVNULL)
    left = _until(lambda: _mounts(tmp))
    killed.kill()
    killed.wait(timeout=60)
    assert processes_left(tmp) == []
    assert len(left) == 1 and _mounts(tmp) == left  # what the kill left: its tmpfs, mounted
    killed_root = left[0].removesuffix("/scratch")
    live = _mha(tmp, str(_slow(tmp_path / "live")), "--format", "json", stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        mounted = _until(lambda: [m for m in _mounts(tmp) if m not in left])
        assert len(mounted) == 1 and _mounts(tmp) == mounted and not os.path.lexists(killed_root)
        third = _mha(tmp, str(CORRECT), "--quiet", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # its sweep comes before its own scratch: once that is mounted, the live run's must still be (the live run
        # is still loading its code: it sleeps at import, up to the 30 s one request may take)
        assert len(_until(lambda: m if len(m := _mounts(tmp)) == 2 else [])) == 2 and mounted[0] in _mounts(tmp)
        assert live.poll() is None
        out, err = third.communicate(timeout=300)
        assert third.returncode == 0 and out.startswith("PASS"), err[-2000:]
        assert "mha-check: removed" not in err  # the live run's scratch is not stale
    finally:
        live.send_signal(signal.SIGTERM)
        _, err = live.communicate(timeout=120)
    swept = [line for line in err.splitlines() if line.startswith("mha-check: removed")]
    assert len(swept) == 1 and "removed 1 folder" in swept[0] and "(1 tmpfs unmounted)" in swept[0], err
    assert killed_root in swept[0] and mounted[0].removesuffix("/scratch") not in swept[0]
    assert _mounts(tmp) == [] and not any(tmp.iterdir())  # it removed its own, as ever


def test_a_grade_killed_with_its_graders_leaves_tmpfs_that_the_next_grade_sweeps(tmp, tmp_path):
    """`grade` and its graders killed together (a scheduler kills the job's process group): the batch folder, its
    staging copy of every submission and each grader's tmpfs stay; the next grade's start removes them all, says so,
    and grades."""
    subs = tmp_path / "subs"
    for name in ("a", "b"):
        _slow(subs / name)
    run = _mha(tmp, "grade", str(subs), "--out", str(tmp_path / "out"), "--jobs", "2", stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL, start_new_session=True)
    left = _until(lambda: m if len(m := _mounts(tmp)) == 2 else [])
    os.killpg(run.pid, signal.SIGKILL)
    run.wait(timeout=60)
    assert processes_left(tmp) == []
    assert len(left) == 2 and _mounts(tmp) == left
    batch = [p for p in tmp.iterdir() if p.name.startswith("mha-check-grade-")]
    assert len(batch) == 1 and all(m.startswith(f"{batch[0]}/") for m in left)
    correct = tmp_path / "correct"
    (correct / "alice").mkdir(parents=True)
    shutil.copy(CORRECT, correct / "alice" / "attention.py")
    again = _mha(tmp, "grade", str(correct), "--out", str(tmp_path / "out2"), "--jobs", "1", stdout=subprocess.PIPE,
                 stderr=subprocess.PIPE, text=True)
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err[-2000:]
    swept = [line for line in err.splitlines() if line.startswith("mha-check: removed")]
    assert len(swept) == 1 and str(batch[0]) in swept[0] and "(2 tmpfs unmounted)" in swept[0], err
    assert _mounts(tmp) == [] and not any(tmp.iterdir())
