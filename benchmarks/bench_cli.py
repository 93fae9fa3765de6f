"""How much a full `mha-check` run costs next to a bare `python -c "import torch"`.

Runs the two commands alternately (so machine noise hits both alike), `--rounds` times each, and prints the medians
and their ratio.  The target: ratio <= 1.5.  A benchmark, not a test: timings on shared machines are noisy.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--target", default="examples/correct_attention.py:MultiHeadAttention")
    args = p.parse_args()
    tool = shutil.which("mha-check") or str(Path(sys.executable).with_name("mha-check"))
    commands = {"import torch": [sys.executable, "-c", "import torch"], "mha-check": [tool, args.target]}
    for cmd in commands.values():  # warm the file cache
        timed(cmd)
    samples = {name: [] for name in commands}
    for _ in range(args.rounds):
        for name, cmd in commands.items():
            samples[name].append(timed(cmd))
    med = {name: statistics.median(s) for name, s in samples.items()}
    for name, s in samples.items():
        print(f"{name:14s} median {med[name]:.3f} s  (min {min(s):.3f}, max {max(s):.3f}, {len(s)} runs)")
    print(f"ratio mha-check / import torch: {med['mha-check'] / med['import torch']:.2f} (target <= 1.5)")
    report = subprocess.run([tool, args.target, "--format", "json"], cwd=ROOT, capture_output=True, text=True)
    print("isolation:", json.loads(report.stdout).get("isolation", {}).get("summary", "(none reported)"))


if __name__ == "__main__":
    main()
