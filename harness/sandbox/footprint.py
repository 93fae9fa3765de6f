"""The memory a child's processes take together, measured by the trusted side while it waits for the child.

Why: the kernel's limits are per process (RLIMIT_DATA, RLIMIT_AS), and without a cgroup of its own (a container,
an ordinary user; mha-check makes none) a child that forks multiplies them: red team 6 held 4.7 GB under
`--memory-mb 1024` with six processes, and the slot's 64 processes at the default 3 GB each could take the grading
machine down with its classmates.  One process is bounded by its own limits and is never measured here.  Two or
more are measured by their proportional set size (Pss in /proc/PID/smaps_rollup: a page shared by n processes
counts 1/n to each, so forked copies of torch are not counted again and again), every WATCH_SECONDS of waiting,
and stopped past the budget of one process (`harness.sandbox.subject`).

And the memory mappings of each process (a line each of /proc/PID/maps), which cost the kernel memory that no limit
counts, neither the process's own (RLIMIT_AS counts the bytes mapped, not the mappings) nor Pss: red team 17's child
forked 60 processes that each mapped one page of a file 60,000 times, 256 MB of address space each, and held 800 MB
of the kernel's unreclaimable memory (SUnreclaim 60 MB -> 864 MB) under `--memory-mb 1024`, while the grader's own
measure of its scratch, which reads those lines, took the whole of its 20 s as the student's time.  A process of
torch holds about 250 (a CUDA build a few hundred more); past MAX_MAPPINGS the child is stopped, as for memory.
"""
from __future__ import annotations

import contextlib
import os

from harness.sandbox import syscalls as linux


MAX_MAPPINGS = 8192  # memory mappings one process may hold: 64 processes so hold at most about 100 MB of the
# kernel's memory (a mapping's structures take some 200 bytes), against 800 MB at the kernel's own bound (65,530)


class TooMuch(Exception):
    """The child's processes took more memory together than one of them may (or one holds more memory mappings
    than MAX_MAPPINGS: `whole` then carries the words, which are not about memory together)."""

    def __init__(self, message: str, whole: str = ""):
        super().__init__(message)
        self.whole = whole


def crowded(pids: list[int], owner: tuple[int, int] | None = None) -> tuple[int, int] | None:
    """(pid, mappings counted) of the first of `pids` holding more than MAX_MAPPINGS memory mappings, else None.
    Counted as newlines of /proc/PID/maps read in large pieces, and no further than just past the bound: a
    process's 60,000 mappings are never parsed one by one.  `owner`: as for proportional_memory.  A process whose
    mappings cannot be read is left to the other measures (a hidden one is named there)."""
    with linux.reading_as(*owner) if owner else contextlib.nullcontext():
        for pid in pids:
            count = _mappings(pid)
            if count > MAX_MAPPINGS:
                return pid, count
    return None


def _mappings(pid: int) -> int:
    try:
        fd = os.open(f"/proc/{pid}/maps", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return 0
    count = 0
    try:
        while count <= MAX_MAPPINGS:
            piece = os.read(fd, 1 << 20)
            if not piece:
                break
            count += piece.count(b"\n")
    except OSError:  # gone meanwhile
        pass
    finally:
        os.close(fd)
    return count


def proportional_memory(pids: list[int], owner: tuple[int, int] | None = None) -> tuple[int, list[int]]:
    """(bytes the processes `pids` take together, Pss summed; the pids whose memory could not be read).  `owner`:
    their (uid, gid) when it is a slot's, read as that uid (root in a Docker container has no CAP_SYS_PTRACE:
    `syscalls.reading_as`)."""
    total, hidden = 0, []
    with linux.reading_as(*owner) if owner else contextlib.nullcontext():
        for pid in pids:
            try:
                with open(f"/proc/{pid}/smaps_rollup", "rb") as f:
                    for line in f:
                        if line.startswith(b"Pss:"):
                            total += int(line.split()[1]) * 1024
                            break
            except PermissionError:
                if not linux.exited(pid):
                    hidden.append(pid)
            except (OSError, ValueError):  # gone meanwhile
                continue
    return total, hidden
