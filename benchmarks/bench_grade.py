"""Batch grading against one `mha-check` run per submission, side by side on the same 50 submissions.

The submissions are the test zoo's correct and buggy implementations (different authors' styles), cycled to 50,
one folder each.  Prints the wall time of `mha-check grade` (warm zygote, --jobs = cores), of 50 sequential
`mha-check` runs (a shell loop), and of 50 runs two at a time (`xargs -P 2`), with the ratios.
A benchmark, not a test: run it on a quiet machine.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_submissions(folder: Path, count: int) -> list[Path]:
    sources = sorted((ROOT / "tests" / "zoo" / "correct").glob("*.py")) + \
        sorted((ROOT / "tests" / "zoo" / "buggy").glob("*.py"))
    files = []
    for i in range(count):
        sub = folder / f"student{i:02d}"
        sub.mkdir(parents=True)
        files.append(Path(shutil.copy(sources[i % len(sources)], sub / "attention.py")))
    return files


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--count", type=int, default=50)
    args = p.parse_args()
    tool = [sys.executable, "-m", "harness.frontends.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        subs = Path(tmp) / "subs"
        files = make_submissions(subs, args.count)
        quiet = dict(cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        start = time.perf_counter()
        subprocess.run(tool + ["grade", str(subs), "--out", str(Path(tmp) / "out")], **quiet)
        batch = time.perf_counter() - start

        start = time.perf_counter()
        for f in files:
            subprocess.run(tool + [str(f), "--format", "json"], **quiet)
        sequential = time.perf_counter() - start

        start = time.perf_counter()
        with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
            list(pool.map(lambda f: subprocess.run(tool + [str(f), "--format", "json"], **quiet), files))
        parallel = time.perf_counter() - start
    print(f"{args.count} submissions")
    print(f"mha-check grade (--jobs {os.cpu_count()}):  {batch:6.1f} s")
    print(f"{args.count} x mha-check, one after another: {sequential:6.1f} s  -> grade is {sequential / batch:.1f}x faster")
    print(f"{args.count} x mha-check, {os.cpu_count()} at a time:     {parallel:6.1f} s  -> grade is {parallel / batch:.1f}x faster")


if __name__ == "__main__":
    main()
