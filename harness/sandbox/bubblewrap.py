"""The bubblewrap mechanism: a `Policy` translated to a bwrap command line (preferred for single runs; bubblewrap is
a small, widely reviewed setuid-free sandbox, Debian package `bubblewrap`).

Two variants, chosen by who runs us:
* root  : bwrap runs as real root WITHOUT a user namespace (with --unshare-all bwrap would add one mapping only
          uid 0, so the slot uid would not exist inside and files it owns would show as nobody).  bwrap keeps
          just CAP_SETUID/SETGID/SETPCAP (to change identity) and CAP_DAC_OVERRIDE (to enter the slot-owned 0700
          scratch); `setpriv` then becomes the slot uid, which clears every capability, empties the bounding set
          and sets no_new_privs.  The kernel user id really is the slot's: RLIMIT_NPROC and file ownership work.
* userns: an ordinary user: bwrap makes an unprivileged user namespace (--unshare-user, --disable-userns); the
          uid stays the user's own.
Limits are applied inside with `prlimit` (hard == soft) just before the identity change, so the grader needs no
preexec_fn.  The caller's stdin/stdout/stderr pass through (our protocol channel).  Killing bwrap kills
everything: --die-with-parent kills bwrap's pid 1 (its reaper), and with it the whole PID namespace.  Not
--as-pid-1: the parent-death signal is sent with the dying bwrap's credentials (uid 0 without CAP_KILL after its
own drop), which may not signal the slot uid, so a worker that is bwrap's direct child would survive bwrap.
Price: the worker's CPU time does not reach wait4() (bwrap does not reap its reaper), so a CPU-limit death is
"SIGKILL that the grader did not send".  bubblewrap cannot confine a process that already runs: the batch zygote's
children use `harness.sandbox.confine`.
"""
from __future__ import annotations

import os
import shutil
import subprocess

from harness.sandbox import seccomp
from harness.sandbox.limits import MB, OOM_FIRST
from harness.sandbox.policy import Policy

_KEPT_BY_ROOT = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_DAC_OVERRIDE")
NAMESPACES = ("ipc", "mount", "net", "pid", "uts")  # and "user" in the userns variant


def executable() -> str | None:
    return shutil.which("bwrap")


def default_variant() -> str:
    return "root" if os.geteuid() == 0 else "userns"


def _data_fd(data: bytes) -> int:
    """An fd bwrap reads a file's contents (or the seccomp program) from; the caller passes it with pass_fds."""
    fd = os.memfd_create("mha-check-bwrap", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[:i + 1]) for i in range(len(parts))]


def _limits(policy: Policy) -> list[str]:
    names = {"RLIMIT_AS": "as", "RLIMIT_DATA": "data", "RLIMIT_CPU": "cpu", "RLIMIT_FSIZE": "fsize",
             "RLIMIT_NOFILE": "nofile", "RLIMIT_NPROC": "nproc", "RLIMIT_CORE": "core",
             "RLIMIT_MSGQUEUE": "msgqueue", "RLIMIT_RTPRIO": "rtprio", "RLIMIT_NICE": "nice"}
    return ["prlimit", *(f"--{names[k]}={v}:{v}" for k, v in policy.rlimits.items())]


def namespaces(variant: str) -> tuple[str, ...]:
    return NAMESPACES + (("user",) if variant == "userns" else ())


def command(policy: Policy, argv: list[str], variant: str | None = None) -> tuple[list[str], list[int]]:
    """(command line, fds to pass).  The caller closes the fds after starting the process.  `variant` forces
    a variant (the tests start the userns variant as an ordinary user from a root parent)."""
    variant = variant or default_variant()
    fds: list[int] = []
    args = [executable(), "--die-with-parent", "--new-session", "--clearenv"]
    args += [f"--unshare-{name}" for name in ("pid", "net", "ipc", "uts")] + ["--unshare-cgroup-try"]  # mount: always
    if variant == "userns":
        args += ["--unshare-user", "--disable-userns", "--uid", str(policy.uid), "--gid", str(policy.gid)]
    else:
        args += ["--cap-drop", "ALL", *(x for cap in _KEPT_BY_ROOT for x in ("--cap-add", cap))]
    made: set[str] = set()
    binds: list[str] = []
    for m in policy.view:
        for parent in _ancestors(m.dest):  # bwrap would create missing parents with the host folder's mode
            if parent not in made and not any(parent.startswith(d + "/") for d in binds):  # a bind's own folder
                args += ["--perms", "0755", "--dir", parent]
                made.add(parent)
        made.add(m.dest)
        if m.kind in ("ro", "rw"):
            binds.append(m.dest.rstrip("/"))
        if m.kind == "ro":
            args += ["--ro-bind", m.source, m.dest]
        elif m.kind == "rw":
            args += ["--bind", m.source, m.dest]
        elif m.kind == "symlink":
            args += ["--symlink", m.source, m.dest]
        elif m.kind == "file":
            fds.append(_data_fd(m.source.encode()))
            args += ["--perms", f"{m.mode:o}", "--ro-bind-data", str(fds[-1]), m.dest]
        elif m.kind == "tmpfs":
            args += ["--perms", f"{m.mode:o}", "--size", str(max(m.size_mb, 1) * MB), "--tmpfs", m.dest]
        elif m.kind == "empty":
            args += ["--perms", f"{m.mode:o}", "--size", str(MB), "--tmpfs", m.dest, "--remount-ro", m.dest]
        elif m.kind == "proc":
            args += ["--proc", m.dest]
        elif m.kind == "dev":
            args += ["--dev", m.dest, "--perms", "1777", "--size", str(max(m.size_mb, 1) * MB),
                     "--tmpfs", m.dest + "/shm"]
        else:
            raise ValueError(f"unknown mount kind {m.kind!r}")
    args += ["--remount-ro", "/"]  # the root tmpfs itself: nothing may be created next to the binds
    for key, value in policy.env.items():
        args += ["--setenv", key, value]
    args += ["--chdir", policy.cwd]
    program = seccomp.program() if policy.seccomp else None
    if program:
        fds.append(_data_fd(program))
        args += ["--seccomp", str(fds[-1])]
    inner = _limits(policy) + (["choom", "-n", OOM_FIRST, "--"] if shutil.which("choom") else [])  # the
    # out-of-memory killer's first choice, as confine.oom_first makes the other mechanisms' children
    if variant == "root":
        inner += ["setpriv", f"--reuid={policy.uid}", f"--regid={policy.gid}", "--clear-groups",
                  "--bounding-set=-all", "--inh-caps=-all"]
    else:
        inner += ["setpriv"]
    inner += ["--no-new-privs", "--", *argv]
    return args + ["--", *inner], fds


def popen(policy: Policy, argv: list[str], variant: str | None = None, **kwargs) -> subprocess.Popen:
    """Start `argv` under bwrap; kwargs go to Popen (stdin/stdout/stderr pipes stay the caller's channel)."""
    args, fds = command(policy, argv, variant)
    try:
        return subprocess.Popen(args, pass_fds=[*kwargs.pop("pass_fds", ()), *fds], start_new_session=True,
                                env={}, **kwargs)
    finally:
        for fd in fds:
            os.close(fd)
