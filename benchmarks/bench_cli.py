"""How much a full `mha-check` run costs next to a bare `python -c "import torch"`.

Runs the two commands alternately (so machine noise hits both alike), `--rounds` times each, and prints the medians
and their ratio.  The target: ratio <= 1.5.  With --against OLD (an earlier checkout with its own .venv) it compares
instead the single run of OLD and of this checkout on the same target file, alternately, the order swapped every
round (issue 27: a slower single run is measured side by side or not at all).
A benchmark, not a test: timings on shared machines are noisy.
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

import sidebyside  # benchmarks/, beside this script

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--target", default="examples/correct_attention.py:MultiHeadAttention",
                   help="FILE.py:ClassName (the class named: --against reads the file by its path in this checkout)")
    p.add_argument("--against", type=Path, help="an older checkout with its own .venv: compare single runs with it")
    args = p.parse_args()
    if ":" not in args.target:  # a target without its class had compared OLD and this checkout on "" (a ratio of 0.56)
        p.error(f"--target {args.target}: name the class too, FILE.py:ClassName")
    tool = shutil.which("mha-check") or str(Path(sys.executable).with_name("mha-check"))
    if args.against:
        return against(args.against.resolve(), tool, args.target, args.rounds)
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


def against(old: Path, tool: str, target: str, rounds: int) -> None:
    """The same target (this checkout's file, by its absolute path) checked by OLD's mha-check and by this one."""
    file, _, name = target.rpartition(":")
    spec = f"{(ROOT / file).resolve()}:{name}"
    commands = {"old": [str(old / ".venv" / "bin" / "mha-check"), spec], "new": [tool, spec]}
    for cmd in commands.values():  # warm the file cache
        timed(cmd)
    times = sidebyside.alternate(lambda which: timed(commands[which]), rounds)
    print(f"{spec}: {rounds} rounds, {sidebyside.summary(times)}")


if __name__ == "__main__":
    main()
