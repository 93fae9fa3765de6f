"""`grade`'s progress line on a terminal: how many are graded, the time since the start, an estimate of the time
left, and the submission that has been running the longest (the one to look at when a batch seems stuck).

The estimate is the median time of the submissions graded so far (a median: one that hit its time limit does not
make every other look long) for each not started yet, what is left of it for each one running, shared among the
jobs.  The line is rewritten in place, at most once a second and after each submission, cut to the terminal's
width; nothing is written when stderr is not a terminal (a log would fill with carriage returns).
"""
from __future__ import annotations

import shutil
import statistics
import sys
import time

from harness.render.view import clean


def clock(seconds: float) -> str:
    """42s, 3m05s, 1h02m: short enough for a line of 80 columns."""
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class Progress:
    """Told when each submission is handed to a grader (`started`) and when it comes back (`finished`)."""

    def __init__(self, total: int, jobs: int, stream=None, now=time.monotonic) -> None:
        self.total, self.jobs, self.now = total, max(1, jobs), now
        self.stream = stream if stream is not None else sys.stderr
        self.begun = now()
        self.running: dict[str, float] = {}  # submission -> when it was handed to a grader
        self.times: list[float] = []  # seconds each finished submission took
        self.shown = 0.0

    def started(self, name: str) -> None:
        self.running[name] = self.now()

    def finished(self, name: str) -> None:
        since = self.running.pop(name, None)
        if since is not None:
            self.times.append(self.now() - since)
        self.show(force=True)

    def estimate(self) -> float | None:
        """Seconds left, or None before a first submission has come back."""
        if not self.times:
            return None
        median, t = statistics.median(self.times), self.now()
        waiting = max(0, self.total - len(self.times) - len(self.running))
        running = sum(max(0.0, median - (t - since)) for since in self.running.values())
        return (waiting * median + running) / min(self.jobs, max(1, waiting + len(self.running)))

    def line(self, width: int = 80) -> str:
        """The line, at most `width` - 1 columns: a long name is cut, never the numbers."""
        t = self.now()
        left = self.estimate()
        text = f"{len(self.times)}/{self.total} graded, {clock(t - self.begun)} elapsed, " + (
            "estimating time left" if left is None else "almost done" if left < 1 else f"about {clock(left)} left")
        if self.running:
            name, since = min(self.running.items(), key=lambda item: item[1])
            lead, took = "; running longest: ", f" ({clock(t - since)})"
            room = width - 1 - len(text) - len(lead) - len(took)
            name = clean(name)
            if room >= 6:
                text += lead + (name if len(name) <= room else name[:room - 3] + "...") + took
        return text[:max(20, width - 1)]

    def show(self, force: bool = False) -> None:
        if not self.stream.isatty() or (not force and self.now() - self.shown < 1.0):
            return
        self.shown = self.now()
        width = shutil.get_terminal_size((80, 24)).columns
        self.stream.write("\r" + self.line(width).ljust(width - 1))
        if len(self.times) >= self.total:
            self.stream.write("\n")
        self.stream.flush()
