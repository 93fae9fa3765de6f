"""Side by side: an older checkout's command and this one's, alternately, the order swapped every round so that
neither always runs in the slower minute; medians and paired ratios (issue 27: a slower run is measured side by side
or not at all).  Shared by bench_cli.py and bench_grade.py."""
from __future__ import annotations

import statistics
from typing import Callable


def alternate(run: Callable[[str], float], rounds: int, each: Callable[[int, dict], None] = lambda i, t: None
              ) -> dict[str, list[float]]:
    """`run("old")` and `run("new")` (each returning seconds) `rounds` times each, alternately; `each(i, times)`
    after every round."""
    times: dict[str, list[float]] = {"old": [], "new": []}
    for i in range(rounds):
        for which in (("old", "new") if i % 2 == 0 else ("new", "old")):
            times[which].append(run(which))
        each(i, times)
    return times


def summary(times: dict[str, list[float]]) -> str:
    """The medians, their ratio and the paired ratios' median and range."""
    med = {which: statistics.median(t) for which, t in times.items()}
    paired = [n / o for n, o in zip(times["new"], times["old"])]
    return (f"median old {med['old']:.3f} s, new {med['new']:.3f} s: ratio {med['new'] / med['old']:.3f}; paired "
            f"ratios median {statistics.median(paired):.3f}, range {min(paired):.2f} to {max(paired):.2f}")
