"""Whether a verdict depends on the seed: every zoo file checked at several seeds, the statuses and the mistake named
compared with the first seed's.

A grade draws its seed at random (issue 27: a replaying child cannot know the inputs), so a verdict that moves with
the seed is a grade that moves between two runs of the same code.  The suite checks at seed 0; this measures the
rest.  A measurement, not a test (1,200 runs take about 6 minutes on 2 cores): run it after a change to a check's
probes or thresholds.

    .venv/bin/python benchmarks/seed_stability.py                      # tests/zoo, seeds 0 and four large ones
    .venv/bin/python benchmarks/seed_stability.py --real --seeds 0,7   # tests/realzoo
    .venv/bin/python benchmarks/seed_stability.py --only single_head   # files whose name holds this

Prints one line per file whose verdict moved (the checks that differ from the first seed's, and the mistake named
at each seed), then the count.  Exit status 1 when any moved.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]

from conftest import REALZOO, ZOO, Reports, zoo_constants  # noqa: E402 - the suite's own runner of many targets

SEEDS = "0,987654321,5555555555555,31337,424242424242"  # 987654321 once moved a causal layer's causal-leakage


def verdict(report) -> tuple[dict[str, str], str | None]:
    named = report.diagnosis.mutant if report.diagnosis is not None else None
    return {c.id: str(c.status) for c in report.checks}, named


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default=SEEDS, help=f"comma-separated (default {SEEDS})")
    parser.add_argument("--real", action="store_true", help="tests/realzoo instead of tests/zoo")
    parser.add_argument("--only", default="", help="only files whose name holds this")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    paths = sorted(REALZOO.glob("[a-z]*.py")) if args.real else sorted(ZOO.glob("[bc]*/*.py"))
    paths = [p for p in paths if args.only in p.name]
    targets = {p: f"{p}:{zoo_constants(p)['TARGET']}" for p in paths}
    reports = Reports(2)
    try:
        for target in targets.values():  # queued all at once: the pool's two zygotes stay busy
            for seed in seeds:
                reports._start(target, {"seed": seed})
        moved = 0
        for path, target in targets.items():
            got = [verdict(reports(target, seed=seed)) for seed in seeds]
            first, _ = got[0]
            if any(g != got[0] for g in got[1:]):
                moved += 1
                changed = {seed: {c: s for c, s in statuses.items() if s != first.get(c)}
                           for seed, (statuses, _) in zip(seeds, got)}
                print(path.name, json.dumps({"checks": changed, "named": [named for _, named in got]}), flush=True)
    finally:
        reports.close()
    print(f"{len(paths)} files at {len(seeds)} seeds: {moved} with a verdict that moved")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
