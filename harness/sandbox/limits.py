"""Limits and walls around the process that runs student code.

On by default, for a single run as for batch grading: a new session (so the whole process group can be killed),
resource limits (CPU time, address space, file size, open files, no core dumps), a throwaway working directory,
and, where the machine allows it (root, or unprivileged user namespaces), a private PID namespace (every process
the submission starts dies with it, even one that left the process group) and an empty network namespace (no
network).  `protections()` says which of these were in force, for the report.
"""
from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
from dataclasses import dataclass


MEMORY_FLOOR_MB = 1024  # below this the child cannot even import torch: refused as a usage error, never blamed


@dataclass(frozen=True)
class Limits:
    call_seconds: float = 30.0  # one request (build, forward, ...) may take this long on the wall clock
    total_seconds: float = 120.0  # the whole check of one target
    cpu_seconds: int = 120
    memory_mb: int = 3072  # address space; importing torch alone needs about 650 MB
    file_mb: int = 16  # the largest file the code may write (its captured output included)
    open_files: int = 256

    def to_dict(self) -> dict:
        return {"call_seconds": self.call_seconds, "total_seconds": self.total_seconds,
                "cpu_seconds": self.cpu_seconds, "memory_mb": self.memory_mb, "file_mb": self.file_mb,
                "open_files": self.open_files}


@functools.lru_cache(maxsize=None)
def namespaces_available() -> bool:
    """Can we run a command in new PID and network namespaces here (root or user namespaces)?"""
    tool = shutil.which("unshare")
    if not tool or os.environ.get("MHA_CHECK_NO_NAMESPACES"):
        return False
    for extra in ([], ["--map-root-user"]):
        try:
            done = subprocess.run([tool, *extra, "--pid", "--fork", "--kill-child", "--net", "--", "true"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            _UNSHARE_EXTRA[:] = extra
            return True
    return False


_UNSHARE_EXTRA: list[str] = []


def wrap(command: list[str]) -> list[str]:
    """The command, inside fresh PID and network namespaces when available."""
    if not namespaces_available():
        return command
    # sh stays as the namespace's init, so the worker is an ordinary process (signals, exit status: 128 + signal)
    return [shutil.which("unshare"), *_UNSHARE_EXTRA, "--pid", "--fork", "--kill-child", "--net", "--",
            "sh", "-c", '"$@"; exit $?', "sh", *command]


def wrap_network_only(command: list[str]) -> list[str]:
    """For the batch zygote: no network, but the global PID namespace (the grader kills its children by pid)."""
    if not namespaces_available():
        return command
    return [shutil.which("unshare"), *_UNSHARE_EXTRA, "--net", "--", *command]


def apply_limits(limits: Limits) -> None:
    """Resource limits for the current process (used in the child before it runs anything of the student's)."""
    mb = 1 << 20
    for name, value in (("RLIMIT_CPU", limits.cpu_seconds), ("RLIMIT_AS", limits.memory_mb * mb),
                        ("RLIMIT_FSIZE", limits.file_mb * mb), ("RLIMIT_NOFILE", limits.open_files),
                        ("RLIMIT_CORE", 0)):
        which = getattr(resource, name, None)
        if which is None:
            continue
        soft, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        try:
            resource.setrlimit(which, (value, hard if name != "RLIMIT_CPU" else value + 5))
        except (ValueError, OSError):
            pass


def preexec(limits: Limits):
    """For subprocess.Popen: limits in the child between fork and exec (the session comes from start_new_session)."""
    return functools.partial(apply_limits, limits)


def protections(limits: Limits, throwaway_cwd: bool) -> list[str]:
    out = ["separate process (verdict computed outside it)", "process group killed on exit",
           f"CPU {limits.cpu_seconds} s", f"wall clock {limits.call_seconds:g} s per request, "
           f"{limits.total_seconds:g} s in all", f"address space {limits.memory_mb} MB",
           f"files up to {limits.file_mb} MB", f"{limits.open_files} open files", "no core dumps",
           "only the private channel inherited"]
    if namespaces_available():
        out += ["PID namespace (no process outlives the check)", "no network (empty network namespace)"]
    else:
        out.append("no PID or network namespace (not available on this machine)")
    if throwaway_cwd:
        out.append("throwaway working directory")
    return out
