"""The Linux system calls that confinement needs and Python 3.11's os module lacks (unshare, mount, pivot_root,
prctl, capset, seccomp), through ctypes.  Every wrapper raises OSError on failure: confinement code must
never continue silently after a failed step.  Plus `until_exited`, waiting for a child's exit without polling."""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import time

_libc = ctypes.CDLL(None, use_errno=True)

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
NAMESPACE_FLAGS = {"mount": CLONE_NEWNS, "uts": CLONE_NEWUTS, "ipc": CLONE_NEWIPC, "pid": CLONE_NEWPID,
                   "net": CLONE_NEWNET, "user": CLONE_NEWUSER, "cgroup": CLONE_NEWCGROUP}

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 0x20, 0x400, 0x800, 0x1000, 0x4000
MS_PRIVATE, MS_RELATIME = 1 << 18, 1 << 21
MNT_DETACH = 2

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 4, 22, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
PR_SET_CHILD_SUBREAPER = 36
SECCOMP_MODE_FILTER = 2

_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source} on {target}")


def umount2(target: str, flags: int) -> None:
    _check(_libc.umount2(target.encode(), ctypes.c_int(flags)), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    number = _SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is None:
        raise OSError(0, f"pivot_root: unknown system call number on {os.uname().machine}")
    _check(_libc.syscall(ctypes.c_long(number), new_root.encode(), put_old.encode()), "pivot_root")


def prctl(option: int, arg2: int = 0, arg3: int = 0) -> int:
    result = _libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3), ctypes.c_ulong(0),
                         ctypes.c_ulong(0))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")
    return result


def die_with_parent(sig: int, parent: int | None = None) -> None:
    """Have the kernel send `sig` when the process that started this one ends, even killed outright (SIGKILL); end
    now if it has already gone.  `parent`: its pid as the starter knew it (a pool's initializer is handed it), so
    that a parent that died before this line is seen too; without it, getppid() now (a process started by exec,
    which watches a socket of its starter besides).  A fork of ours uses `fork_dying_with_parent`."""
    parent = os.getppid() if parent is None else parent
    prctl(PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:
        os._exit(0)


_parent_watch: int | None = None  # a pidfd of the process this one dies with (`fork_dying_with_parent`), held until
# `forget_parent`, so that the death signal a uid change clears can be armed again (`rearm_parent_death`)
_parent_pid = 0  # that process's pid as it forked (the check where the kernel has no pidfds)


def fork_dying_with_parent(sig: int) -> int:
    """os.fork(), the child receiving `sig` when this process ends, as if the kernel had sent it
    (PR_SET_PDEATHSIG) even when this process ends before the child could ask for it: the kernel sends nothing
    then, and a child that goes on would outlive its parent (a submission's process outliving its killed zygote,
    talking to the grader).  The parent is watched by a pidfd opened before the fork, not by getppid(), which
    cannot tell in a new PID namespace's first process (its parent is outside: 0, alive or not)."""
    global _parent_watch, _parent_pid
    try:
        watch = os.pidfd_open(os.getpid())
    except (OSError, AttributeError):  # a kernel without pidfds (before Linux 5.3): getppid() decides
        watch = None
    parent = os.getpid()
    try:
        pid = os.fork()
    except BaseException:
        if watch is not None:
            os.close(watch)
        raise
    if pid:
        if watch is not None:
            os.close(watch)
        return pid
    if _parent_watch is not None:  # the watch of this process's grandparent, inherited
        with contextlib.suppress(OSError):
            os.close(_parent_watch)
    _parent_watch, _parent_pid = watch, parent
    rearm_parent_death(sig)
    return 0


def parent_watch() -> int | None:
    """The descriptor `fork_dying_with_parent` holds: one a fresh child closing every other descriptor keeps."""
    return _parent_watch


def rearm_parent_death(sig: int) -> None:
    """PR_SET_PDEATHSIG (again, after a uid change cleared it); if the parent of `fork_dying_with_parent` has
    already ended, `sig` now, as the kernel would have sent it had it been armed in time."""
    prctl(PR_SET_PDEATHSIG, sig)
    if _parent_watch is not None:
        gone = bool(select.select([_parent_watch], [], [], 0)[0])  # a pidfd is readable once its process exited
    else:
        gone = _parent_pid != 0 and os.getppid() not in (_parent_pid, 0)  # 0: a parent outside our PID namespace
    if gone and os.getpid() == 1:  # a PID namespace's first process ignores the signals sent from inside it
        os._exit(128 + sig)
    if gone:  # delivered before kill() returns: the end, or the handler of a process that catches it (the keeper)
        os.kill(os.getpid(), sig)


def forget_parent() -> None:
    """Close the parent's watch: not a descriptor to leave to the code run next (the death signal stays armed)."""
    global _parent_watch
    if _parent_watch is not None:
        with contextlib.suppress(OSError):
            os.close(_parent_watch)
        _parent_watch = None


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def clear_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets (version 3 header: 64 capability bits)."""
    header = _CapHeader(0x20080522, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def drop_bounding_set() -> None:
    """Remove every capability from the bounding set (needs CAP_SETPCAP): nothing can ever be regained."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        prctl(PR_CAPBSET_DROP, cap)


def clear_ambient() -> None:
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


@contextlib.contextmanager
def reading_as(uid: int, gid: int):
    """In this thread only, look into /proc/PID of processes of `uid` as they could themselves: the file-system
    identity (fsuid, fsgid; per thread, never the process's other threads) set to theirs, and back.  Why: root in a
    Docker container has no CAP_SYS_PTRACE, and without it the kernel hides another uid's /proc/PID/fd and maps
    from it (red team 6: every file a child deleted but held open went uncounted).  Only root may; elsewhere, and
    for our own uid, nothing changes."""
    if os.geteuid() != 0 or uid == 0:
        yield
        return
    _libc.setfsgid(ctypes.c_uint(gid))
    _libc.setfsuid(ctypes.c_uint(uid))
    try:
        if _libc.setfsuid(ctypes.c_uint(0xFFFFFFFF)) != uid:  # an invalid id changes nothing and tells the current
            raise OSError(errno.EPERM, f"could not take the file-system identity of uid {uid}")
        yield
    finally:
        _libc.setfsuid(ctypes.c_uint(0))
        _libc.setfsgid(ctypes.c_uint(0))


def install_seccomp(program: bytes) -> None:
    """Load a classic-BPF seccomp filter (8 bytes per instruction); requires no_new_privs or CAP_SYS_ADMIN."""
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog))


def network_interfaces() -> list[str]:
    """Interfaces of our network namespace (from /proc/net/dev: cheaper to import than socket)."""
    with open("/proc/net/dev") as f:
        return sorted(line.split(":", 1)[0].strip() for line in f.readlines()[2:])


def status_fields(pid: int | str = "self") -> dict[str, str]:
    """A process's /proc/PID/status (Uid, CapEff, NoNewPrivs, Seccomp, ...); this process's by default."""
    with open(f"/proc/{pid}/status") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def ready_by(fd: int, deadline: float, write: bool = False) -> bool:
    """Whether `fd` can be read (or written) before time.monotonic() reaches `deadline`.  Past the deadline it still
    looks once: a grader that was itself stopped (SIGSTOP, a paused container) then finds what its child sent
    meanwhile, instead of blaming the child for the time the grader was not running."""
    wait = max(0.0, deadline - time.monotonic())
    return bool(select.select([], [fd], [], wait)[1] if write else select.select([fd], [], [], wait)[0])


def until_exited(pid: int, end: float, fallback: float = 0.005) -> None:
    """Sleep until our child `pid` has exited (it can then be reaped) or time.monotonic() reaches `end`, woken by a
    pidfd the moment it exits: a killed submission takes milliseconds to tear down, and polling in 5 and 10 ms steps
    kept each submission's slot waiting about 20 ms longer than that.  Where the kernel has no pidfds (before Linux
    5.3), or the process is already gone, sleeps `fallback` seconds instead; callers re-check with waitpid either
    way."""
    try:
        fd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        time.sleep(max(0.0, min(fallback, end - time.monotonic())))
        return
    try:
        select.select([fd], [], [], max(0.0, end - time.monotonic()))
    finally:
        os.close(fd)


def _states_and_parents() -> tuple[dict[int, str], dict[int, int]]:
    """Every process's state letter and parent pid, from /proc/PID/stat (a process gone meanwhile is left out)."""
    parent, state = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                state[int(entry)], parent[int(entry)] = fields[0], int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    return state, parent


def _tree(root: int, parent: dict[int, int]) -> list[int]:
    tree, frontier = [root], [root]
    while frontier:
        below = [pid for pid, ppid in parent.items() if ppid in frontier and pid not in tree]
        tree += below
        frontier = below
    return tree


def children() -> list[int]:
    """Our own children, from /proc (a process left behind is ours once its parent is gone, where we are a
    subreaper: the zygote, a single run's keeper)."""
    return children_of(os.getpid())


def exited(pid: int) -> bool:
    """Whether `pid` has ended (a zombie waiting to be reaped, or gone): it holds no file and no memory."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True


def children_of(pid: int) -> list[int]:
    """`pid`'s children now, from /proc."""
    return [child for child, parent in _states_and_parents()[1].items() if parent == pid]


def process_tree(root: int) -> list[int]:
    """`root` and every process descending from it (a PID namespace's orphans are adopted inside it)."""
    return _tree(root, _states_and_parents()[1])


def stopped_in_tree(root: int) -> bool:
    """Whether `root` or a process below it is stopped (SIGSTOP, SIGTSTP; state T or t in /proc/PID/stat): such a
    process answers nothing, whatever its code does."""
    state, parent = _states_and_parents()
    return any(state.get(pid) in ("T", "t") for pid in _tree(root, parent))
