"""The memory a child's processes take together, measured by the trusted side while it waits for the child.

Why: the kernel's limits are per process (RLIMIT_DATA, RLIMIT_AS), and without a cgroup of its own (a container,
an ordinary user; mha-check makes none) a child that forks multiplies them: red team 6 held 4.7 GB under
`--memory-mb 1024` with six processes, and the slot's 64 processes at the default 3 GB each could take the grading
machine down with its classmates.  One process is bounded by its own limits and is never measured here.  Two or
more are measured by their proportional set size (Pss in /proc/PID/smaps_rollup: a page shared by n processes
counts 1/n to each, so forked copies of torch are not counted again and again), every WATCH_SECONDS of waiting,
and stopped past the budget of one process (`harness.sandbox.subject`).
"""
from __future__ import annotations

import contextlib

from harness.sandbox import syscalls as linux


class TooMuch(Exception):
    """The child's processes took more memory together than one of them may."""


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
