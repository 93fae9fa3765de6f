"""`mha-check result REPORT.json [CHECK]`: a saved report read again, without running anything.

    mha-check attention.py:MyAttn --format json -o report.json   # one run (the only one that imports torch)
    mha-check result report.json                                 # the text report, exit status as that run's
    mha-check result report.json causal-leakage                  # one check: exit 0 if it passed, 1 if not

Why: a platform that scores one step per check (GitHub Classroom's command grader) would otherwise run the whole of
mha-check once per check; with this, the checks run once and every step reads its own check from the report the
trusted side wrote.  The words are the report's own (the shared view): the check's finding, the root cause it
follows from, the fix; a check that could not be decided says so and is not passed (the scoring rule).
"""
from __future__ import annotations

import argparse
import json
import sys

from harness.engine.report import Report
from harness.render import formats, text, view
from harness.wire.status import Status


def _load(path: str, parser: argparse.ArgumentParser) -> Report:
    try:
        with open(path, encoding="utf-8") as f:
            return Report.from_dict(json.load(f))
    except OSError as e:
        parser.error(f"cannot read {path}: {e.strerror} (write it with mha-check TARGET --format json -o {path})")
    except (ValueError, KeyError, TypeError) as e:
        parser.error(f"{path} is not an mha-check JSON report ({type(e).__name__}: {e})")


def one_check(report: Report, check_id: str) -> tuple[bool, str]:
    """(passed, what to print) for one check of the report."""
    shown = view.build(report)
    line = next(ln for ln in shown.lines if ln.id == check_id)
    words = {Status.PASS: "PASS", Status.FAIL: "FAIL", Status.CANNOT_TELL: "COULD NOT BE DECIDED",
             Status.SKIP: "NOT VERIFIED"}
    word = "DOES NOT APPLY" if line.not_applicable else words[line.status]  # exit 0 all the same: a pass's points
    return line.passed, f"{word} {line.id}: {line.claim}\n\n{formats.detail(line, shown.root)}"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="mha-check result", description=__doc__.split("\n\n")[0])
    p.add_argument("report", metavar="REPORT.json", help="a report written by mha-check TARGET --format json")
    p.add_argument("check", nargs="?", help="one check's id: exit 0 if it passed, 1 if it did not")
    args = p.parse_args(argv[1:])
    report = _load(args.report, p)
    if args.check is None:
        print(text.render(view.build(report)))
        return 0 if report.passed else 1
    if args.check not in {c.id for c in report.checks}:
        p.error(f"the report has no check {args.check!r} (it has {', '.join(c.id for c in report.checks)})")
    passed, words = one_check(report, args.check)
    print(words)
    return 0 if passed else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv))
