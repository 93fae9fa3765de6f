"""What the child may spend: the budgets of one check, in one record.

Wall-clock budgets are enforced by the trusted side (every request has a deadline); the others become kernel
resource limits of the child (`rlimits()`), always with the hard limit equal to the soft one, so that the child
cannot raise them again.  `harness.sandbox.policy` puts them into the confinement policy.
"""
from __future__ import annotations

import functools
import glob
import importlib.util
import os
from dataclasses import asdict, dataclass, field

MEMORY_FLOOR_MB = 1024  # below this the child cannot even import torch: refused as a usage error, never blamed
MB = 1 << 20
OOM_FIRST = "1000"  # /proc/PID/oom_score_adj's highest value, the child's: the first the out-of-memory killer takes


@functools.lru_cache(maxsize=1)  # an installation's libraries do not change while it runs: every Limits() asks
def library_mb() -> int:
    """The size of the shared libraries torch may map: its own and, for a CUDA build, NVIDIA's.  Found on disk
    without importing torch.  They take address space but are not memory the code uses: PyPI's default (CUDA)
    build maps about 3.2 GB on `import torch` alone, so an address-space limit of the memory budget turned every
    target into a MemoryError at construct on an ordinary install.  The memory budget is therefore RLIMIT_DATA
    (what tensors and Python objects take), and the address space is that budget plus these libraries."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return 0
    root = os.path.dirname(spec.origin)
    site = os.path.dirname(root)
    files = (glob.glob(os.path.join(root, "lib", "*.so*")) + glob.glob(os.path.join(site, "torch.libs", "*.so*")) +
             glob.glob(os.path.join(site, "nvidia", "**", "*.so*"), recursive=True))
    return sum(os.path.getsize(f) for f in files if os.path.isfile(f)) // MB


@dataclass(frozen=True)
class Limits:
    call_seconds: float = 30.0  # one request (build, forward, ...) may take this long on the wall clock
    total_seconds: float = 120.0  # the whole check of one target
    cpu_seconds: int = 120  # reaching it kills the child (hard == soft: SIGKILL, no SIGXCPU warning first)
    memory_mb: int = 3072  # memory the code may take (RLIMIT_DATA); importing torch alone takes about 220 MB
    file_mb: int = 16  # the largest file the code may write (its captured output included)
    open_files: int = 256
    processes: int = 64  # processes and threads of the slot's uid (RLIMIT_NPROC counts threads, per uid)
    tmpfs_mb: int = 64  # each of the child's private /tmp and /dev/shm (not counted in its address space)
    tmpfs_files: int = 4096  # files and folders in each of them (nr_inodes: empty files cost kernel memory, not size)
    scratch_mb: int = 64  # what the code may write in its working folder, on top of the copy of the submission
    scratch_files: int = 2048  # files and folders it may make there (a tmpfs's nr_inodes, where one can be mounted)
    library_mb: int = field(default_factory=library_mb)  # address space for torch's libraries, on top of memory_mb

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def in_all_mb(self) -> int:
        """What the child's processes may take together (`harness.sandbox.footprint`): one process's address space,
        its memory and torch's libraries.  The kernel's limits hold each process alone, and a child that forks would
        multiply them (red team 6: 4.7 GB under --memory-mb 1024)."""
        return self.memory_mb + self.library_mb

    def rlimits(self) -> dict[str, int]:
        """resource-module name -> value, applied as both the soft and the hard limit."""
        return {"RLIMIT_DATA": self.memory_mb * MB, "RLIMIT_AS": (self.memory_mb + self.library_mb) * MB,
                "RLIMIT_CPU": int(self.cpu_seconds),
                "RLIMIT_FSIZE": self.file_mb * MB, "RLIMIT_NOFILE": self.open_files,
                "RLIMIT_NPROC": self.processes, "RLIMIT_CORE": 0,
                "RLIMIT_MSGQUEUE": 0,  # no POSIX message queue either (seccomp refuses mq_open): they outlive it
                # no real-time scheduling and no nice value below the one it started with, whatever the grader was
                # given (a systemd unit's LimitRTPRIO=, limits.conf's rtprio/nice): a SCHED_FIFO busy loop would
                # starve classmates and the grader on the same cores (red team 12)
                "RLIMIT_RTPRIO": 0, "RLIMIT_NICE": 0}
