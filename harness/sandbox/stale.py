"""Which of our folders in the temp dir outlived the process that made them: an owner lock held for that process's life.

A scratch folder (`harness.sandbox.scratch.Scratch`, a tmpfs where the grader may mount) and `grade`'s batch folder
are removed by the process that made them, on every way out but one: SIGKILL (the OOM killer, `kill -9`, a scheduler
or a container runtime stopping the job).  On a grading machine that lives for a semester such folders pile up: a copy
of a student's code each, and mounted tmpfs memory.  The next start sweeps them (`harness.sandbox.scratch.sweep_stale`),
and must never take a folder a live grader still uses (two graders may run at once on one machine).

So each such folder holds `OWNER`, a file on which its maker holds an flock(LOCK_EX) for as long as it lives: the
kernel releases the lock when the last descriptor of it closes, however the process ended, and a pid cannot be reused
under it.  A folder is stale when it is named as ours (`PREFIX`), is a real folder of our own uid, holds `OWNER`, and
its lock can be taken.  The lock is held before the file gets its name (made under a temporary name, locked, then
renamed): a sweeper never sees an `OWNER` nobody holds yet.  A folder without `OWNER` (being made, or made by an
older mha-check) is never taken.  The descriptor is close-on-exec, and a confined child closes every descriptor it
did not ask for (`harness.child.zygote._child`): a submission never holds, or releases, a grader's lock.  Forked
processes of ours (a batch's graders) inherit it: the batch's folder is not stale while one of them still runs.
"""
from __future__ import annotations

import fcntl
import os
import stat

PREFIX = "mha-check-"  # the temp-dir names our folders have (tempfile.mkdtemp(prefix=PREFIX...))
OWNER = "owner.lock"
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

_HELD: dict[str, int] = {}  # folder -> the descriptor whose flock says this process is alive and uses it


def hold(folder: str) -> None:
    """Mark `folder` (fresh, ours, made with a name starting with PREFIX) as in use by this process until `let_go`
    or this process's end."""
    parent = os.open(folder, _FOLDER)
    try:
        making = f".{OWNER}.{os.getpid()}"
        fd = os.open(making, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.write(fd, f"{os.getpid()}\n".encode())  # for a person looking: who made it
            os.rename(making, OWNER, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            os.close(fd)
            raise
    finally:
        os.close(parent)
    _HELD[folder] = fd


def let_go(folder: str) -> None:
    """After `folder` is removed (or given up on: a folder left behind is then the next start's to sweep)."""
    fd = _HELD.pop(folder, None)
    if fd is not None:
        os.close(fd)


def orphans(parent: str) -> list[tuple[str, int]]:
    """The folders in `parent` whose owner has ended, each with the descriptor of its lock, now held by us (close it
    once the folder is removed: until then no other sweeper takes it).  Never one of this process's own."""
    found = []
    try:
        names = sorted(n for n in os.listdir(parent) if n.startswith(PREFIX))
    except OSError:
        return []
    for name in names:
        path = os.path.join(parent, name)
        if path in _HELD:
            continue
        fd = _taken(path)
        if fd is not None:
            found.append((path, fd))
    return found


def _taken(path: str) -> int | None:
    """The lock of `path` taken by us, or None: not a folder of ours with an owner lock, or its owner lives."""
    try:
        folder = os.open(path, _FOLDER)
    except OSError:
        return None
    try:
        st = os.fstat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            return None
        fd = os.open(OWNER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BlockingIOError
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # held: its owner (or a process it forked) lives, or another start is sweeping it right now
        os.close(fd)
        return None
    return fd
