"""The trusted side's end of the channel to a child: writes and reads that never block past a deadline.

A child that stops reading its requests or stops answering is a time-out, never a grader blocked forever; while it
works, an optional `watch` runs every WATCH_SECONDS (the measure of a scratch folder no filesystem of its own bounds).
"""
from __future__ import annotations

import os
import time

from harness.sandbox import syscalls as linux


def write_until(fd: int, data: bytes, deadline: float) -> None:
    """Write all of `data` by `deadline` (TimeoutError otherwise): a child that stops reading its channel (a full
    pipe, a socket it only peeks at) is a time-out, not a grader blocked forever in write()."""
    os.set_blocking(fd, False)
    view = memoryview(data)
    while view:
        if not linux.ready_by(fd, deadline, write=True):
            raise TimeoutError
        try:
            view = view[os.write(fd, view):]
        except BlockingIOError:
            continue


WATCH_SECONDS = 0.5  # how often an unbounded scratch and the memory of the child's processes are measured while
# the child works (waits for its answer)
MEMORY_WATCH_SECONDS = 2.0  # how often the memory alone is measured between frames that come back quickly


class DeadlineReader:
    """A pipe read with a deadline: a child that stops answering is a time-out, not a hung grader.  `watch`, when
    given, is called every WATCH_SECONDS of waiting (it raises to stop the wait: a scratch past its budget)."""

    def __init__(self, fd: int, deadline: float, watch=None):
        self.fd, self.deadline, self.watch = fd, deadline, watch

    def _ready(self) -> None:
        while self.watch is not None and time.monotonic() < self.deadline:
            if linux.ready_by(self.fd, min(self.deadline, time.monotonic() + WATCH_SECONDS)):
                return
            self.watch()
        if not linux.ready_by(self.fd, self.deadline):
            raise TimeoutError

    def read(self, n: int) -> bytes:
        self._ready()
        return os.read(self.fd, min(n, 1 << 20))

    def readinto(self, view: memoryview) -> int:
        self._ready()
        return os.readv(self.fd, [view[:1 << 20]])
