"""Confinement applied by the process to itself: the policy's walls without bubblewrap.

Two callers:
* a child forked from the batch zygote (`harness.child.zygote`) calls `confine()` right after the fork, before
  anything of the submission runs (bubblewrap cannot confine a process that already runs);
* the launcher (`harness/sandbox/launch.py`) confines itself and then execs the worker, for single runs where
  bubblewrap is missing or does not work.

`confine()` must run in a single-threaded process (just after fork, or a fresh launcher).  With namespaces it
forks twice, like bubblewrap: the calling process stays behind as a *relay* (in the old namespaces; it waits and
exits with the child's status, so the caller's pid, process group and exit status keep their meaning), the first
child is pid 1 of the new PID namespace (it builds the view, drops everything, then only reaps, non-dumpable; when
it exits the kernel kills whatever is left in the namespace) and `confine()` returns in pid 2, the process that
runs the untrusted code.

What is possible depends on who we are:
  root with CAP_SYS_ADMIN : namespaces + explicit view + uid/gid of the slot, no capabilities   (mechanism builtin)
  ordinary user, userns   : the same inside a user namespace; the uid stays the user's          (mechanism builtin)
  anything else           : rlimits, no_new_privs, seccomp, and the slot uid when root         (mechanism none)
In all three, where the kernel has Landlock, the worker then restricts itself to the policy's paths
(`harness.sandbox.landlock`): without a mount namespace the only wall around the host's files but permissions;
with one, a second wall behind the view.
The record returned says what was actually in force, measured in the confined process after the drop and before
any untrusted code; anything the policy demanded that is not in force raises ConfinementError (fail closed).
"""
from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import stat
import sys
import time

from harness.sandbox import landlock, seccomp
from harness.sandbox import syscalls as linux
from harness.sandbox.limits import MB, OOM_FIRST
from harness.sandbox.policy import DEVICES, UID_BASE, Policy

BASE = "/tmp"  # where the new root is assembled (a tmpfs mounted over it in our private mount namespace)
LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launch.py")
MAX_RECORD = 1 << 16  # bytes of an isolation record


class ConfinementError(RuntimeError):
    """A step of the policy failed after we started applying it: the child must not run."""


# -- namespaces ----------------------------------------------------------------------------------------------------
def _enter_namespaces(policy: Policy, root: bool) -> tuple[list[str], bool]:
    """unshare() the policy's namespaces; an ordinary user adds a user namespace.  ([], False) when not allowed."""
    if not policy.namespaces:
        return [], False
    flags = 0
    for name in policy.namespaces:
        flags |= linux.NAMESPACE_FLAGS[name]
    try:
        linux.unshare(flags)
        return list(policy.namespaces), False
    except OSError:
        if root:  # a root without CAP_SYS_ADMIN (a default container): a user namespace would not change our uid
            return [], False
    uid, gid = os.getuid(), os.getgid()
    try:
        linux.unshare(flags | linux.CLONE_NEWUSER)
    except OSError:
        return [], False
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
    return [*policy.namespaces, "user"], True


def _close_all_fds() -> None:
    linux.forget_parent()
    os.closerange(0, 1 << 20)


def _exit_like(raw: int) -> None:
    os._exit(128 + os.WTERMSIG(raw) if os.WIFSIGNALED(raw) else os.WEXITSTATUS(raw))


def _fork_relay() -> None:
    """Fork; the parent waits for the child and exits as it did; the child (pid 1 of the new PID namespace)
    returns.  The child dies with SIGKILL if the relay is killed."""
    pid = linux.fork_dying_with_parent(signal.SIGKILL)
    if pid == 0:
        return
    _close_all_fds()
    while True:
        try:
            _, raw = os.waitpid(pid, 0)
            _exit_like(raw)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(70)


def _fork_init() -> None:
    """In pid 1: fork the worker (pid 2) and stay behind as the namespace's reaper.  pid 1 exits with the
    worker's status, which makes the kernel kill every other process of the namespace."""
    worker = linux.fork_dying_with_parent(signal.SIGKILL)
    if worker == 0:
        return
    linux.prctl(linux.PR_SET_DUMPABLE, 0)  # the untrusted code may not ptrace or write into pid 1
    _close_all_fds()
    while True:
        try:
            pid, raw = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(70)
        if pid == worker:
            _exit_like(raw)


def _sweep(seconds: float = 5.0) -> None:
    """Kill and reap every child until none is left (or `seconds` pass): each one a leftover of the worker."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        kids = linux.children()
        for pid in kids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        while True:
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                return
        if not kids:
            time.sleep(0.005)


def _fork_keeper() -> None:
    """Without a PID namespace: fork; the parent stays behind as the worker's *keeper*, a child subreaper in our
    own uid (the worker cannot signal it unless it stays our uid), so that whatever the worker leaves behind
    (a double fork, setsid, setpgid) becomes the keeper's child; when the worker ends, or SIGTERM asks (the
    grader's way to stop it), the keeper kills the worker and every such process, reaps them, and only then exits
    with the worker's status: nothing of the run outlives what the grader waits for.  The child returns."""
    linux.prctl(linux.PR_SET_CHILD_SUBREAPER, 1)
    worker = linux.fork_dying_with_parent(signal.SIGKILL)
    if worker == 0:
        linux.prctl(linux.PR_SET_CHILD_SUBREAPER, 0)
        return
    signal.signal(signal.SIGTERM, lambda *_: os.kill(worker, signal.SIGKILL))
    linux.rearm_parent_death(signal.SIGTERM)  # the grader gone (even before this line): the same clean-up
    linux.prctl(linux.PR_SET_DUMPABLE, 0)
    _close_all_fds()
    raw = None
    while raw is None:
        try:
            pid, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(70)
        if pid == worker:
            raw = status
    _sweep()
    _exit_like(raw)


# -- filesystem view -----------------------------------------------------------------------------------------------
_KEEP_FLAGS = ((os.ST_NOEXEC, linux.MS_NOEXEC), (os.ST_NOATIME, linux.MS_NOATIME),
               (os.ST_NODIRATIME, linux.MS_NODIRATIME), (os.ST_RELATIME, linux.MS_RELATIME))


def _bind(fd: int, target: str, read_only: bool) -> None:
    """Bind (not recursive: a mount below the source stays hidden instead of staying writable), then remount
    nosuid,nodev (+ro), keeping the flags a user namespace is not allowed to clear."""
    linux.mount(f"/proc/self/fd/{fd}", target, None, linux.MS_BIND)
    have = os.statvfs(target).f_flag
    flags = linux.MS_REMOUNT | linux.MS_BIND | linux.MS_NOSUID | linux.MS_NODEV
    flags |= linux.MS_RDONLY if read_only else 0
    for st_flag, ms_flag in _KEEP_FLAGS:
        flags |= ms_flag if have & st_flag else 0
    linux.mount(None, target, None, flags)


def _mountpoint(path: str, is_dir: bool) -> None:
    os.makedirs(path if is_dir else os.path.dirname(path), mode=0o755, exist_ok=True)
    if not is_dir and not os.path.exists(path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


def _tmpfs(target: str, mode: int, size_mb: int, files: int = 0) -> None:
    os.makedirs(target, mode=0o755, exist_ok=True)
    linux.mount("tmpfs", target, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV,
                f"mode={mode:o},size={max(size_mb, 1) * MB}" + (f",nr_inodes={files}" if files else ""))


def _make_dev(target: str, shm_mb: int, device_fds: dict[str, int], shm_files: int = 0) -> None:
    _tmpfs(target, 0o755, 1)
    for name in DEVICES:
        _mountpoint(f"{target}/{name}", False)
        linux.mount(f"/proc/self/fd/{device_fds[name]}", f"{target}/{name}", None, linux.MS_BIND)
    for name, link in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                       ("stderr", "/proc/self/fd/2")):
        os.symlink(link, f"{target}/{name}")
    _tmpfs(f"{target}/shm", 0o1777, shm_mb, shm_files)
    linux.mount(None, target, None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY | linux.MS_NOSUID)


# The kernel's settings under the new /proc, read-only as bubblewrap makes them: a child kept as root (no
# capabilities, where the slot's uid cannot be used) could otherwise write /proc/sys/kernel/core_pattern, a program
# the kernel runs as root at the next crash (found by an attacker's trial).
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")


def _read_only_in_place(path: str) -> None:
    if os.path.lexists(path):
        linux.mount(path, path, None, linux.MS_BIND | linux.MS_REC)
        linux.mount(None, path, None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY | linux.MS_NOSUID |
                    linux.MS_NODEV | linux.MS_NOEXEC)


def _build_view(policy: Policy) -> None:
    """Assemble the view on a fresh tmpfs and pivot_root into it; the host root is detached afterwards."""
    linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)  # nothing we do propagates to the host
    # open every source first: the tmpfs mounted on BASE would hide sources that live below it (the scratch)
    sources = {m.source: os.open(m.source, os.O_PATH | os.O_CLOEXEC) for m in policy.view if m.kind in ("ro", "rw")}
    devices = {name: os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC) for name in DEVICES}
    linux.mount("tmpfs", BASE, "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, "mode=0755,size=4m")
    for m in policy.view:
        target = BASE + m.dest
        if m.kind in ("ro", "rw"):
            _mountpoint(target, stat.S_ISDIR(os.fstat(sources[m.source]).st_mode))
            _bind(sources[m.source], target, read_only=m.kind == "ro")
        elif m.kind == "symlink":
            os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
            os.symlink(m.source, target)
        elif m.kind == "file":
            _mountpoint(target, False)
            with open(target, "w") as f:
                f.write(m.source)
            os.chmod(target, m.mode)
        elif m.kind == "tmpfs":
            _tmpfs(target, m.mode, m.size_mb, m.files)
        elif m.kind == "empty":  # over a folder of ours inside a read-only bind: it exists there already
            linux.mount("tmpfs", target, "tmpfs", linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV |
                        linux.MS_NOEXEC, f"mode={m.mode:o},size={MB},nr_inodes=16")
        elif m.kind == "proc":  # only pid 1 of the new namespace may mount the proc that shows that namespace
            os.makedirs(target, mode=0o755, exist_ok=True)
            linux.mount("proc", target, "proc", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC)
            for name in PROC_READ_ONLY:
                _read_only_in_place(f"{target}/{name}")
        elif m.kind == "dev":
            _make_dev(target, m.size_mb, devices, m.files)
        else:
            raise ConfinementError(f"unknown mount kind {m.kind!r}")
    for fd in (*sources.values(), *devices.values()):
        os.close(fd)
    os.mkdir(BASE + "/.old", 0o700)
    linux.pivot_root(BASE, BASE + "/.old")
    os.chdir("/")
    linux.umount2("/.old", linux.MNT_DETACH)
    os.rmdir("/.old")
    linux.mount(None, "/", None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY | linux.MS_NOSUID | linux.MS_NODEV)


# -- identity, limits, privileges ------------------------------------------------------------------------------------
def apply_limits(policy: Policy) -> None:
    """Hard == soft, so the child cannot raise them again (a limit already lower stays lower); and the child is the
    first the kernel's out-of-memory killer takes (`oom_first`)."""
    for name, value in policy.rlimits.items():
        which = getattr(resource, name)
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))
    oom_first()


def oom_first() -> None:
    """The child and every process it starts (the value is inherited) are the out-of-memory killer's first choice,
    before the grader, its classmates' graders and the machine's own services.  Red team 8: on a machine with many
    cores, 64 processes of up to 1 GB each could exhaust memory in the half second before the footprint watch
    (harness.sandbox.footprint) stops them, and the kernel would then pick by size.  Raising one's own value needs no
    privilege; lowering it again needs CAP_SYS_RESOURCE, which the child never has."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(OOM_FIRST)
    except OSError:
        pass  # no /proc (a view without it): the limits and the footprint watch still hold


def _become_slot_user(policy: Policy) -> None:
    """setresuid clears the permitted and effective capabilities; refused (PermissionError) without CAP_SETUID."""
    try:
        os.setgroups([])
        os.setresgid(policy.gid, policy.gid, policy.gid)
        os.setresuid(policy.uid, policy.uid, policy.uid)
    except PermissionError:
        if policy.require_drop:
            raise ConfinementError("cannot change to the slot's uid (no CAP_SETUID/CAP_SETGID here)") from None


def _drop_privileges(policy: Policy, root: bool, userns: bool) -> None:
    apply_limits(policy)
    if root or userns:
        try:
            linux.drop_bounding_set()  # needs CAP_SETPCAP: root, or us inside our user namespace
        except OSError:
            if policy.require_drop:
                raise
    if root:
        _become_slot_user(policy)
    if policy.drop_capabilities:
        linux.clear_ambient()
        linux.clear_capabilities()
    if policy.no_new_privs:
        linux.prctl(linux.PR_SET_NO_NEW_PRIVS, 1)
    linux.rearm_parent_death(signal.SIGKILL)  # the uid change cleared it; a parent gone meanwhile ends us here


def _filter_system_calls(policy: Policy) -> None:
    """The seccomp filter, last of the drop: it refuses prctl(PR_SET_DUMPABLE), which the steps before it need (pid 1
    non-dumpable, the worker dumpable again after the uid change)."""
    program = seccomp.program() if policy.seccomp else None
    if program:
        linux.install_seccomp(program)


# -- what is in force --------------------------------------------------------------------------------------------
def restrict_paths(policy: Policy, namespaces: list[str]) -> dict:
    """Landlock, in the process that will run the untrusted code (its /proc/self is the one allowed), after
    no_new_privs; the record's `landlock` block.  Absent from the kernel: said, not fatal."""
    if not policy.landlock:
        return {"in_force": False, "why": "not asked for"}
    return landlock.restrict(list(policy.landlock), private_ok="mount" in namespaces)


def _at_most(paths: list[str], count: int = 40) -> list[str]:
    """A list for the record, which must stay below MAX_RECORD (site-packages expanded entry by entry is long)."""
    return paths if len(paths) <= count else [*paths[:count], f"... and {len(paths) - count} more"]


def inspect(policy: Policy, namespaces: list[str], mechanism: str, paths: dict | None = None) -> dict:
    """Measured in the confined process, before any untrusted code: the `isolation` record for the report."""
    status = linux.status_fields()
    caps = {k: int(status[k], 16) for k in ("CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd")}
    limits = {}
    for name in policy.rlimits:
        soft, hard = resource.getrlimit(getattr(resource, name))
        limits[name] = {"soft": soft, "hard": hard}
    explicit = "mount" in namespaces
    paths = paths or {"in_force": False, "why": "not applied"}
    fenced = paths["in_force"] and not explicit
    view = "explicit binds on an empty root" if explicit else \
        "host filesystem, limited by Landlock to the policy's paths" if fenced else \
        "host filesystem (file permissions only)"
    return {
        "mechanism": mechanism,
        "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
        "namespaces": sorted(namespaces),
        "pid_in_namespace": os.getpid() if "pid" in namespaces else None,
        "network_interfaces": linux.network_interfaces(),
        "view": view,
        "read_only_root": bool(os.statvfs("/").f_flag & os.ST_RDONLY),
        "read_only": policy.binds("ro") if explicit else
        _at_most([p for r, p in policy.landlock if r in ("read", "exec")]) if fenced else [],
        "read_write": policy.binds("rw") + policy.binds("tmpfs") + ["/dev/shm"] if explicit else
        [p for r, p in policy.landlock if r == "write"] if fenced else ["(host)"],
        "landlock": paths,
        "scratch": os.getcwd(),
        "limits_hard_equals_soft": all(v["soft"] == v["hard"] for v in limits.values()),
        "limits": limits,
        "capabilities_dropped": caps["CapEff"] == caps["CapPrm"] == caps["CapAmb"] == 0,
        "bounding_set_empty": caps["CapBnd"] == 0,
        "no_new_privs": status.get("NoNewPrivs", "0").strip() == "1",
        "seccomp": status.get("Seccomp", "0").strip() == "2",
        "verified": "in the child, after the drop, before any untrusted code",
    }


def check(policy: Policy, isolation: dict) -> None:
    """Fail closed: anything the policy demanded and the kernel accepted must be visibly in force."""
    problems = []
    if policy.require_drop and (isolation["uid"], isolation["gid"]) != (policy.uid, policy.gid):
        problems.append(f"identity is uid {isolation['uid']} gid {isolation['gid']}, not the slot's {policy.uid}")
    if policy.require_drop and policy.uid >= UID_BASE and isolation["groups"]:
        problems.append(f"supplementary groups {isolation['groups']} remain")
    if policy.drop_capabilities and not isolation["capabilities_dropped"]:
        problems.append("capabilities remain")
    if policy.no_new_privs and not isolation["no_new_privs"]:
        problems.append("no_new_privs not set")
    if not isolation["limits_hard_equals_soft"]:
        problems.append("a hard limit is above its soft limit")
    if "pid" in isolation["namespaces"] and isolation["pid_in_namespace"] != 2:
        problems.append(f"pid {isolation['pid_in_namespace']} in the new PID namespace, expected 2")
    if "mount" in isolation["namespaces"] and not isolation["read_only_root"]:
        problems.append("root not read-only")
    if "net" in isolation["namespaces"] and isolation["network_interfaces"] != ["lo"]:
        problems.append(f"network interfaces {isolation['network_interfaces']}")
    if "mount" not in isolation["namespaces"]:  # the host's files, seen with the slot's own permissions (and Landlock)
        unreadable = [m.source for m in policy.view if m.kind == "ro" and not os.access(m.source, os.R_OK)]
        if unreadable:
            problems.append(f"without a mount namespace uid {isolation['uid']} cannot read {', '.join(unreadable)}")
    if problems:
        raise ConfinementError("; ".join(problems))


def _report(isolation: dict, status_fd: int | None) -> None:
    if status_fd is not None:
        os.write(status_fd, json.dumps(isolation).encode()[:MAX_RECORD])
        os.close(status_fd)


def confine(policy: Policy, status_fd: int | None = None, keeper: bool = False) -> dict:
    """Apply `policy` to this process (see the module docstring), write the isolation record to `status_fd` and
    return it, in the process that will run the untrusted code.  `keeper`: without a PID namespace, leave a keeper
    behind (`_fork_keeper`; a zygote's children have the zygote, a subreaper already).  Raises (ConfinementError,
    OSError), in whichever process failed, when a step fails; callers must then _exit without running anything."""
    root = os.geteuid() == 0
    namespaces, userns = _enter_namespaces(policy, root)
    keeper = keeper and "pid" not in namespaces
    if "pid" in namespaces:
        _fork_relay()
    elif keeper:
        _fork_keeper()
    if "mount" in namespaces:
        _build_view(policy)
    os.chdir(policy.cwd)  # while we may still enter any folder (a slot-owned 0700 scratch, for a root kept as root)
    _drop_privileges(policy, root, userns)
    if "pid" in namespaces:
        _fork_init()
    linux.forget_parent()  # the death signal stays armed; the descriptor is not the submission's to keep
    linux.prctl(linux.PR_SET_DUMPABLE, 1)  # own /proc/self/fd readable again (the uid change cleared it)
    _filter_system_calls(policy)
    os.environ.clear()
    os.environ.update(policy.env)
    paths = restrict_paths(policy, namespaces)
    isolation = inspect(policy, namespaces, "builtin" if "mount" in namespaces else "none", paths)
    isolation["keeper"] = keeper  # its parent is a keeper: the grader stops it with SIGTERM to the keeper
    check(policy, isolation)
    _report(isolation, status_fd)
    return isolation


def attest(policy_json: str, status_fd: int, mechanism: str, namespaces: tuple[str, ...]) -> None:
    """Inside a sandbox someone else built (bubblewrap): measure and check what is in force, exactly as
    `confine` does, and report it; called by the worker's first lines, before anything of the submission."""
    policy = Policy.from_json(policy_json)
    isolation = inspect(policy, list(namespaces), mechanism, restrict_paths(policy, list(namespaces)))
    check(policy, isolation)
    _report(isolation, status_fd)


def command(policy: Policy, argv: list[str], status_fd: int) -> list[str]:
    """The launcher's command line: it confines itself, writes the isolation record to `status_fd` (close-on-exec
    in the launcher, closed before the exec) and execs `argv` inside.  -I -S: nothing from the environment or
    site-packages runs in the launcher."""
    return [sys.executable, "-I", "-S", "-B", LAUNCHER, str(status_fd), policy.to_json(), "--", *argv]
