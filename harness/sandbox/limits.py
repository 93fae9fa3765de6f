"""What the child may spend: the budgets of one check, in one record.

Wall-clock budgets are enforced by the trusted side (every request has a deadline); the others become kernel
resource limits of the child (`rlimits()`), always with the hard limit equal to the soft one, so that the child
cannot raise them again.  `harness.sandbox.policy` puts them into the confinement policy.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

MEMORY_FLOOR_MB = 1024  # below this the child cannot even import torch: refused as a usage error, never blamed
MB = 1 << 20


@dataclass(frozen=True)
class Limits:
    call_seconds: float = 30.0  # one request (build, forward, ...) may take this long on the wall clock
    total_seconds: float = 120.0  # the whole check of one target
    cpu_seconds: int = 120  # reaching it kills the child (hard == soft: SIGKILL, no SIGXCPU warning first)
    memory_mb: int = 3072  # address space; importing torch alone needs about 650 MB
    file_mb: int = 16  # the largest file the code may write (its captured output included)
    open_files: int = 256
    processes: int = 64  # processes and threads of the slot's uid (RLIMIT_NPROC counts threads, per uid)
    tmpfs_mb: int = 64  # each of the child's private /tmp and /dev/shm (not counted in its address space)

    def to_dict(self) -> dict:
        return asdict(self)

    def rlimits(self) -> dict[str, int]:
        """resource-module name -> value, applied as both the soft and the hard limit."""
        return {"RLIMIT_AS": self.memory_mb * MB, "RLIMIT_CPU": int(self.cpu_seconds),
                "RLIMIT_FSIZE": self.file_mb * MB, "RLIMIT_NOFILE": self.open_files,
                "RLIMIT_NPROC": self.processes, "RLIMIT_CORE": 0}
