"""Landlock: the child's filesystem wall where no mount namespace gives it a view of its own.

Why: in a container that allows no new namespaces (root without CAP_SYS_ADMIN under Docker's default seccomp
profile: Gradescope's case) the child sees the host's files, limited only by permissions, and mha-check's install
is world-readable: a submission could load the lesson's correct layer by the path of `reference/causal_mha.py`,
a mutant with its bug undone, or a correct layer of the zoo in `tests/zoo`, and subclass it.  Landlock (Linux 5.13+)
needs no namespace and no capability, only no_new_privs, and Docker's default profile allows its system calls: the
process restricts itself to a list of paths, for good, and every process it starts inherits the restriction.

The rules (`rules`, computed by the trusted side, `harness.sandbox.policy`) are plain data: (right, path) pairs.
    list    : list a folder's names (and of every folder below it), read no file      (harness/, our own code's root)
    read    : read files and list folders below it                                     (harness/child, site-packages)
    exec    : read, and run programs below it                                          (the interpreter, /usr)
    device  : read and write an existing file, make nothing                            (/dev/null, /dev/urandom)
    write   : everything below it: make, write, remove                                 (its scratch)
    private : `write`, but only inside a mount namespace, where the path is the child's own tmpfs (/tmp, /dev/shm)
    own     : `read`, but only inside a mount namespace, where the path is the child's own (/proc of its PID namespace)
A folder that holds something the child must not read (our reference/ beside harness/ in site-packages) is
expanded by `expand` into its other entries, since a Landlock rule always covers everything below its folder.

`restrict` applies them to the calling process and returns what was in force, for the isolation record.  Landlock
missing (an old kernel: ENOSYS; disabled at boot: EOPNOTSUPP; refused by a container's seccomp profile: EPERM) is
not an error: the record says so and the other walls stay.  The file system rights are handled up to ABI 3 (refer,
truncate; ioctls on devices are left alone).  Where the kernel has them, and at no cost to a child that only
computes: TCP bind and connect refused (ABI 4: no localhost service of the grader, no upload; UDP stays open),
and signals and abstract unix sockets scoped to the child's own processes (ABI 6: without a PID namespace it could
otherwise kill any process of its uid, the grader's own when an ordinary user grades).
"""
from __future__ import annotations

import ctypes
import errno
import os
import stat

_libc = ctypes.CDLL(None, use_errno=True)
_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}  # create_ruleset, add_rule, restrict_self
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE  # the rights a rule on a file (not a folder) may carry
_ABI_FS = {1: (1 << 13) - 1, 2: (1 << 14) - 1}  # handled per ABI; 3 and later: up to TRUNCATE (not IOCTL_DEV)
RIGHTS = {"list": READ_DIR, "read": READ_FILE | READ_DIR, "exec": EXECUTE | READ_FILE | READ_DIR,
          "device": READ_FILE | WRITE_FILE | TRUNCATE, "write": (1 << 15) - 1, "private": (1 << 15) - 1,
          "own": READ_FILE | READ_DIR}
UNAVAILABLE = {errno.ENOSYS: "the kernel has no Landlock (Linux 5.13 or later)",
               errno.EOPNOTSUPP: "Landlock is disabled on this kernel (boot option lsm=)",
               errno.EPERM: "Landlock's system calls are refused here (a seccomp profile)"}


NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


def _attr_size(version: int) -> int:
    """The part of the ruleset's attributes this kernel knows (a larger size is refused by older kernels)."""
    return 8 if version < 4 else 16 if version < 6 else 24


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _syscall(index: int, *args) -> int:
    numbers = _SYSCALLS.get(os.uname().machine)
    if numbers is None:
        raise OSError(errno.ENOSYS, f"Landlock's system call numbers are unknown on {os.uname().machine}")
    result = _libc.syscall(ctypes.c_long(numbers[index]), *args)
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def abi() -> int:
    """The kernel's Landlock ABI version (1 for 5.13, ...); raises OSError (ENOSYS, EOPNOTSUPP, EPERM) without it."""
    return _syscall(0, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))


def handled(version: int) -> int:
    return _ABI_FS.get(version, (1 << 15) - 1)


def restrict(rules: list[tuple[str, str]], private_ok: bool) -> dict:
    """Restrict this process (and all it will start) to `rules`; needs no_new_privs.  `private_ok`: the `private`
    and `own` paths are our own (a mount namespace); without one they would be the host's, so they are left out.
    Returns the record's `landlock` block: {"in_force": True, "abi", "rules", "tcp_refused", "signals_scoped"} or
    {"in_force": False, "why"}.
    Paths that do not exist or this uid cannot open are skipped (they allow nothing); any other failure after the
    kernel said it has Landlock raises OSError."""
    if os.uname().machine not in _SYSCALLS:
        return {"in_force": False, "why": f"Landlock's system call numbers are not known here ({os.uname().machine})"}
    try:
        version = abi()
    except OSError as e:
        return {"in_force": False, "why": UNAVAILABLE.get(e.errno, f"Landlock: {e.strerror}")}
    mask = handled(version)
    net = NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0
    scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
    attr = _RulesetAttr(mask, net, scoped)
    ruleset = _syscall(0, ctypes.byref(attr), ctypes.c_size_t(_attr_size(version)), ctypes.c_uint32(0))
    count = 0
    try:
        for right, path in rules:
            if right in ("private", "own") and not private_ok:
                continue
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                continue  # nothing to allow: gone, or not ours to open (confine.check names an unreadable view)
            try:
                allowed = RIGHTS[right] & mask
                if not stat.S_ISDIR(os.fstat(fd).st_mode):
                    allowed &= _FILE_ONLY
                if allowed:
                    beneath = _PathBeneathAttr(allowed, fd)
                    _syscall(1, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(beneath),
                             ctypes.c_uint32(0))
                    count += 1
            finally:
                os.close(fd)
        _syscall(2, ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return {"in_force": True, "abi": version, "rules": count, "tcp_refused": bool(net), "signals_scoped": bool(scoped)}


# -- computing the rules (trusted side) ----------------------------------------------------------------------------
def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def expand(right: str, path: str, hidden: list[str]) -> list[tuple[str, str]]:
    """`right` on `path`, except on the `hidden` paths below it: a folder holding a hidden path becomes `list` on
    itself plus `right` on each of its other entries, recursively.  A hidden path's name stays visible, its
    contents do not."""
    if any(_under(path, h) for h in hidden):
        return []
    real = os.path.realpath(path)
    if real != path and any(_under(real, h) or _under(h, real) for h in hidden):
        return []  # a link into what hides (a venv's lib64 -> lib): a rule on it would cover its target whole, and
        # the target is reached, hidden paths and all, by its own name (a red team's wheel install read reference/)
    if right == "list" or not any(_under(h, path) for h in hidden):
        return [(right, path)]
    out = [("list", path)]
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return out
    for name in names:
        out += expand(right, os.path.join(path, name), hidden)
    return out
