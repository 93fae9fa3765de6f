"""Folders a grader killed outright left behind are swept at the next start, never a live grader's
(harness.sandbox.stale, harness.sandbox.scratch.sweep_stale).  Each grader here is a process of its own that makes a
scratch as a grade's grader does (a tmpfs of its own where root may mount, else a plain folder), says where, and
waits: killed with SIGKILL, it cannot clean up."""
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import ROOT
from harness.sandbox import scratch, stale

GRADER = """
import sys, tempfile, time
tempfile.tempdir = sys.argv[1]
from harness.sandbox import scratch
slot = scratch.claim_slot()
room = scratch.Scratch.empty(slot.number, *((1 << 20, 100) if sys.argv[2] == "mounted" else ()))
print(room.root, flush=True)
time.sleep(600)
"""


@pytest.fixture
def temp_dir(monkeypatch):
    """A temp dir of the test's own (the slots' uids may pass through it, as through /tmp), set as this process's
    and given to the graders started here."""
    folder = tempfile.mkdtemp(prefix="stale-test-")
    os.chmod(folder, 0o711)
    monkeypatch.setattr(tempfile, "tempdir", folder)
    yield folder
    scratch.remove_tree(folder)


def _grader(folder: str, kind: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", GRADER, folder, kind], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    root = proc.stdout.readline().strip()
    assert root.startswith(os.path.join(folder, stale.PREFIX)), root
    return proc, root


def _killed(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stdout.close()


@pytest.mark.parametrize("kind", ["mounted", "plain"])
def test_a_killed_graders_scratch_is_swept_and_a_live_graders_is_not(temp_dir, kind):
    """Two graders at once; one killed outright leaves its scratch (and its tmpfs: memory of the machine's, for as
    long as it stays mounted); the sweep takes that one only, and the live grader's scratch, tmpfs and all, stays
    until its grader has ended too."""
    if kind == "mounted" and os.geteuid() != 0:
        pytest.skip("only root mounts a scratch")
    killed, killed_root = _grader(temp_dir, kind)
    live, live_root = _grader(temp_dir, kind)
    try:
        _killed(killed)
        assert os.path.isdir(os.path.join(killed_root, "scratch"))  # what the kill left
        assert bool(scratch.tmpfs_below(killed_root)) == (kind == "mounted")
        line = scratch.sweep_stale()
        assert line.startswith("mha-check: removed 1 folder of earlier runs") and killed_root in line
        assert f"runs of this user, uid {os.getuid()}, whose process is gone" in line  # a user trial took other
        # people's for its own; the next, "of anyone on this machine", for a sweep of other users' (only its own uid's)
        assert ("1 tmpfs unmounted" in line) == (kind == "mounted") and "\n" not in line
        assert not os.path.lexists(killed_root) and scratch.tmpfs_below(killed_root) == []
        assert os.path.isdir(os.path.join(live_root, "scratch")) and live.poll() is None
        assert bool(scratch.tmpfs_below(live_root)) == (kind == "mounted")
        assert scratch.sweep_stale() == ""  # nothing more: the live one's lock is held
        assert os.path.isdir(live_root)
    finally:
        _killed(live)
    assert live_root in scratch.sweep_stale()
    assert os.listdir(temp_dir) == []


def test_only_folders_of_ours_with_a_free_owner_lock_are_taken(temp_dir):
    """Named as ours but without an owner lock (being made, or an older mha-check's), a symlink named as ours, a
    folder of another uid, a name not ours, and this process's own scratch: none is taken."""
    bare = os.path.join(temp_dir, f"{stale.PREFIX}bare")
    os.mkdir(bare)
    beside = tempfile.mkdtemp(prefix="stale-test-beside-")
    elsewhere = tempfile.mkdtemp(prefix=stale.PREFIX, dir=beside)  # a stale one, but not in the temp dir
    try:
        stale.hold(elsewhere)
        stale.let_go(elsewhere)
        os.symlink(elsewhere, os.path.join(temp_dir, f"{stale.PREFIX}link"))
        other = tempfile.mkdtemp(prefix="not-ours-", dir=temp_dir)
        stale.hold(other)
        stale.let_go(other)
        foreign = tempfile.mkdtemp(prefix=stale.PREFIX, dir=temp_dir)
        stale.hold(foreign)
        stale.let_go(foreign)
        if os.geteuid() == 0:
            os.chown(foreign, 12345, 12345)
        else:
            scratch.remove_tree(foreign)
        own = scratch.Scratch.empty(1)
        try:
            assert scratch.sweep_stale() == ""
            assert all(os.path.lexists(p) for p in (bare, elsewhere, other, own.root))
            assert os.path.lexists(os.path.join(temp_dir, f"{stale.PREFIX}link"))
        finally:
            own.remove()
        assert not os.path.lexists(own.root)
    finally:
        scratch.remove_tree(beside)


def test_an_owner_lock_is_held_in_forked_processes_and_let_go_after_removal(temp_dir):
    """A batch's graders are forked from the process that made its folder: the folder is not stale while one of
    them still runs, even once that process has ended; and a scratch removed lets its lock go."""
    folder = tempfile.mkdtemp(prefix=stale.PREFIX, dir=temp_dir)
    stale.hold(folder)
    child = os.fork()
    if child == 0:
        time.sleep(600)
        os._exit(0)
    try:
        stale.let_go(folder)  # the maker's own descriptor closed: as if it had ended
        assert stale.orphans(temp_dir) == []  # its fork holds the lock still
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    taken = stale.orphans(temp_dir)
    assert [path for path, _ in taken] == [folder]
    assert stale.orphans(temp_dir) == []  # taken by the sweep in progress: no second sweeper takes it
    for _, fd in taken:
        os.close(fd)
    room = scratch.Scratch.empty(2)
    room.remove()
    assert room.root not in stale._HELD and not os.path.lexists(room.root)


def test_a_stale_folder_whose_tmpfs_cannot_be_unmounted_is_left_whole_and_said_so(temp_dir, monkeypatch):
    """Where unmounting is refused (a container without CAP_SYS_ADMIN, after a run that could mount), the sweep
    said "1 tmpfs unmounted" all the same and removed the owner lock beside the mount: the folder then stayed for
    good, since a folder without a lock is never taken.  Now it is left whole, lock included, and the line says
    why, so that a sweep that can unmount takes it later."""
    folder = tempfile.mkdtemp(prefix=stale.PREFIX, dir=temp_dir)
    stale.hold(folder)
    stale.let_go(folder)  # its maker ended
    os.mkdir(os.path.join(folder, "scratch"))
    monkeypatch.setattr(scratch, "tmpfs_below", lambda path: [os.path.join(folder, "scratch")] if path == folder
                        else [])
    monkeypatch.setattr(scratch, "unmount_below", lambda path: None)  # refused, as without CAP_SYS_ADMIN
    line = scratch.sweep_stale()
    assert line.startswith("mha-check: removed 0 folders") and "tmpfs unmounted" not in line, line
    assert f"left {folder} as they are" in line and "CAP_SYS_ADMIN" in line
    assert os.path.isfile(os.path.join(folder, stale.OWNER))
    monkeypatch.undo()  # the mount gone (unmounted by someone who could): the next sweep takes the folder
    monkeypatch.setattr(tempfile, "tempdir", temp_dir)
    assert folder in scratch.sweep_stale() and not os.path.lexists(folder)
