"""`mha-check TARGET` once its command line is parsed: the options checked and the child started.

harness.frontends.cli parses the command line with nothing heavy imported (so that --help and --version stay
instant) and loads this module only for a run.  The child is started before the engine is imported
(harness.frontends.single_report runs the checks and writes the report), so that its torch import overlaps with the
engine's.
"""
from __future__ import annotations

import argparse
import os
import sys

from harness.frontends import options, seeds, typed_target
from harness.sandbox import pool

GRADING_FORMATS = ("gradescope", "prairielearn", "junit")  # a report in these is a grade: confined or refused


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The run the parsed command line asks for (its usage errors end through `parser`); the exit status."""
    a_grade = args.grading or args.format in GRADING_FORMATS  # (`grading` below is the rubric)
    run_options = options.from_args(args, parser, grading=seeds.STAFF if a_grade else "", only=options.ids(args.only),
                                    skip=options.ids(args.skip), leakage_map=bool(args.plot),
                                    debug=args.debug)  # rules: with the rubric, later.  A grade's seed: drawn
    _check_output(args.output, parser)
    if args.plot:
        from harness.render.plot import require_matplotlib  # noqa: PLC0415 - start-up: only --plot needs it

        try:
            require_matplotlib()
        except RuntimeError as e:
            parser.error(str(e))
    if args.target and not args.list_checks and not a_grade:  # a student's run: a target that names no file is a
        mistyped = typed_target.problem(args.target) or typed_target.arg_problem(
            args.target, run_options.overrides)  # command line to correct (a grade's is the student's failure)
        if mistyped:
            print(f"mha-check: error: {mistyped}", file=sys.stderr)
            return 2
    subject = make = None
    isolation = pool.isolation  # the walls' verdicts on a child (imported by pool already)
    if args.target and not args.list_checks:
        swept = pool.scratch.sweep_stale()  # what runs killed outright (SIGKILL) left in the temp dir: never a
        if swept:  # live one's (harness.sandbox.stale)
            print(swept, file=sys.stderr)
        make = lambda: pool.single_run(args.target, overrides=run_options.overrides, seed=run_options.seed,
                                       weight_map=run_options.weight_map, limits=run_options.limits,
                                       grading=a_grade, allow_unconfined=args.allow_unconfined or not a_grade)
        try:
            subject = make()  # its torch import (if any: see single_run) overlaps with ours below
        except isolation.IsolationFailed as e:
            return _refuse(isolation.refusal_line([isolation.explain(str(e))]), a_grade)
        _say_how_confined(subject, a_grade, isolation)
    # the engine only now: the child's torch import (if any: see single_run) overlaps with its import
    from harness.frontends import single_report  # noqa: PLC0415 - start-up: imported once the child has started

    try:
        return single_report.finish(args, parser, subject, make, run_options, a_grade)
    except isolation.IsolationFailed as e:  # a restart after a crash could not be confined as the first was
        return _refuse(isolation.refusal_line([isolation.explain(str(e))]), a_grade)


def _refuse(line: str, grading: bool) -> int:
    """The one line a run that cannot be confined ends with (exit status 2: nothing was checked)."""
    print(f"mha-check: error: {line}" if grading else f"mha-check: error: {line.split('. To grade: ')[0]}",
          file=sys.stderr)
    return 2


def _say_how_confined(subject, grading: bool, isolation) -> None:
    """A child confined less than a grade needs says so first: a student checking their own code may go on (it is
    their own code), a grade goes on only when --allow-unconfined accepted it."""
    unfit = isolation.unfit_to_grade(subject.record)
    if unfit and grading:
        print(f"mha-check: warning: graded although {unfit} (accepted with --allow-unconfined)", file=sys.stderr)
    elif unfit:
        print(f"mha-check: note: {unfit}. Fine for checking your own code; a grade (--format gradescope, "
              "prairielearn, junit or --grading) is refused here", file=sys.stderr)


def _check_output(path: str | None, parser) -> None:
    """-o to a folder, or into a folder that does not exist, is a usage error before any work."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        parser.error(f"-o {path}: that is a folder; give a file name")
    if not os.path.isdir(folder):
        parser.error(f"-o {path}: the folder {folder} does not exist")


