"""Batch grading against one `mha-check` run per submission, side by side on the same 50 submissions.

The submissions are the test zoo's correct and buggy implementations (different authors' styles), cycled to 50,
one folder each.  Each round times `mha-check grade` (warm zygote, --jobs = cores) and 50 sequential `mha-check`
runs, interleaved: the single runs in BLOCKS blocks, each right after a grade of the whole batch, so that every
grade is paired with single runs made in the same minute (this machine's speed drifts by a fifth within the hour,
and a grade timed minutes away from its single runs moved the ratio by as much); then 50 runs `cores` at a time.
Prints every round, the medians and their ratios, the paired ratios (each grade against the block of single runs
after it, scaled to the whole batch) with their range, and the isolation every child had (full isolation is the
default: the slot uid, namespaces and the read-only view when the machine allows them).
With --against OLD (a checkout of an earlier commit with its own .venv), it compares instead: `mha-check grade` of
the same submissions by OLD and by this checkout, alternately (the order swapped every pair, so that neither always
runs in the slower minute), and prints each pair, the medians, their ratio, the median of the paired ratios and the
machine's load; the submissions are then the older zoo's (both can grade them), and the verdicts of the two summaries
are compared on the checks both have (issue 27: a slower grade is measured side by side or not at all).
A benchmark, not a test: timings on shared machines are noisy.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import sidebyside  # benchmarks/, beside this script

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = 5  # grades per round, each followed by count / BLOCKS single runs


def make_submissions(folder: Path, count: int, root: Path = ROOT) -> list[Path]:
    sources = sorted((root / "tests" / "zoo" / "correct").glob("*.py")) + \
        sorted((root / "tests" / "zoo" / "buggy").glob("*.py"))
    files = []
    for i in range(count):
        sub = folder / f"student{i:02d}"
        sub.mkdir(parents=True)
        files.append(Path(shutil.copy(sources[i % len(sources)], sub / "attention.py")))
    return files


def isolation_of(report: Path) -> str:
    return json.loads(report.read_text()).get("isolation", {}).get("summary", "(none reported)")


def _verdicts(summary: Path) -> dict[str, dict[str, str]]:
    """Each submission's verdicts in a summary: passed, needs review, target, diagnosis and every check's status."""
    timing = {"seconds", "isolation", "process", "other_attempts", "not_graded", "score", "max_score", "pass", "fail",
              "cannot_tell", "skip"}  # counts and scores follow the checks, which may be more in a newer summary
    with open(summary, newline="") as f:
        return {r["submission"]: {c: v for c, v in r.items() if c not in timing} for r in csv.DictReader(f)}


def against(old: Path, count: int, pairs: int, jobs: int) -> None:
    """`mha-check grade` by `old` and by this checkout, alternately, on the same submissions (see the docstring)."""
    trees = {"old": old.resolve(), "new": ROOT}
    loads: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        subs = Path(tmp) / "subs"
        make_submissions(subs, count, trees["old"])

        def grade(which: str) -> float:
            out = Path(tmp) / f"out-{which}"
            shutil.rmtree(out, ignore_errors=True)
            loads.append(os.getloadavg()[0])
            start = time.perf_counter()
            subprocess.run([str(trees[which] / ".venv" / "bin" / "python"), "-m", "harness.frontends.cli", "grade",
                            str(subs), "--out", str(out), "--jobs", str(jobs)], cwd=trees[which],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            return time.perf_counter() - start

        times = sidebyside.alternate(grade, pairs, lambda i, t: print(
            f"pair {i + 1}: old {t['old'][-1]:.2f} s, new {t['new'][-1]:.2f} s, "
            f"ratio {t['new'][-1] / t['old'][-1]:.2f} (load {loads[-1]:.1f})", flush=True))
        old_rows, new_rows = (_verdicts(Path(tmp) / f"out-{which}" / "summary.csv") for which in ("old", "new"))
    print(f"{count} submissions, --jobs {jobs}, {pairs} pairs, load {min(loads):.1f} to {max(loads):.1f}")
    print(sidebyside.summary(times))
    both = lambda row, other: {c: v for c, v in row.items() if c in other}  # the columns both summaries have
    differ = sorted(name for name, row in old_rows.items()
                    if both(row, new_rows.get(name, {})) != both(new_rows.get(name, {}), row))
    print("verdicts on the checks both have: " + (f"{len(differ)} differ: {', '.join(differ)}" if differ else
                                                  "identical"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--count", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--against", type=Path, help="an older checkout with its own .venv: compare grade with it")
    p.add_argument("--pairs", type=int, default=6, help="with --against: grades by each")
    args = p.parse_args()
    if args.against:
        return against(args.against, args.count, args.pairs, os.cpu_count() or 2)
    tool = [sys.executable, "-m", "harness.frontends.cli"]
    cores = os.cpu_count() or 2
    times: dict[str, list[float]] = {"grade": [], "sequential": [], "parallel": []}
    paired: list[float] = []  # each grade against the single runs right after it, scaled to the whole batch
    with tempfile.TemporaryDirectory() as tmp:
        subs = Path(tmp) / "subs"
        files = make_submissions(subs, args.count)
        quiet = dict(cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        single = lambda f: subprocess.run(tool + [str(f), "--format", "json"], **quiet)
        blocks = [files[i::BLOCKS] for i in range(BLOCKS)]
        for r in range(args.rounds):
            sequential = 0.0
            for b, block in enumerate(blocks):
                out = Path(tmp) / f"out{r}-{b}"
                start = time.perf_counter()
                subprocess.run(tool + ["grade", str(subs), "--out", str(out), "--jobs", str(cores)], **quiet)
                times["grade"].append(time.perf_counter() - start)
                start = time.perf_counter()
                for f in block:
                    single(f)
                spent = time.perf_counter() - start
                sequential += spent
                paired.append(spent * len(files) / len(block) / times["grade"][-1])
            times["sequential"].append(sequential)

            start = time.perf_counter()
            with ThreadPoolExecutor(cores) as pool:
                list(pool.map(single, files))
            times["parallel"].append(time.perf_counter() - start)
            grades = times["grade"][-BLOCKS:]
            print(f"round {r + 1}: grade {statistics.median(grades):.1f} s (median of {BLOCKS}: "
                  f"{', '.join(f'{g:.1f}' for g in grades)}), sequential {sequential:.1f} s, "
                  f"{cores} at a time {times['parallel'][-1]:.1f} s; paired ratios "
                  f"{', '.join(f'{x:.1f}' for x in paired[-BLOCKS:])}", flush=True)
        batch_isolation = isolation_of(out / "student00.json")
        single_run = subprocess.run(tool + [str(files[0]), "--format", "json"], cwd=ROOT, capture_output=True,
                                    text=True)
        single_isolation = json.loads(single_run.stdout).get("isolation", {}).get("summary", "(none reported)")
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"{args.count} submissions, medians of {args.rounds} rounds ({len(times['grade'])} grades)")
    print(f"mha-check grade (--jobs {cores}):  {med['grade']:6.1f} s")
    print(f"{args.count} x mha-check, one after another: {med['sequential']:6.1f} s  -> grade is "
          f"{med['sequential'] / med['grade']:.1f}x faster (target >= 10)")
    print(f"paired (each grade against the single runs made right after it): median "
          f"{statistics.median(paired):.1f}x, range {min(paired):.1f}x to {max(paired):.1f}x, "
          f"{sum(x >= 10 for x in paired)} of {len(paired)} at or above 10x")
    print(f"{args.count} x mha-check, {cores} at a time:     {med['parallel']:6.1f} s  -> grade is "
          f"{med['parallel'] / med['grade']:.1f}x faster")
    print(f"isolation in grade:      {batch_isolation}")
    print(f"isolation in single runs: {single_isolation}")


if __name__ == "__main__":
    main()
