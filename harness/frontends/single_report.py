"""`mha-check TARGET`, second half: the checks run on the child already started, the report rendered and written.

Imported by harness.frontends.single once the child is started: the engine, the checks and the renderers import
here while the child imports torch.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from checks import needs_by_id
from harness.engine import instructor
from harness.engine.runner import Options, UsageError, run_checks, select
from harness.frontends.writing import WRITE_FAILED, reason, write_atomic
from harness.render import formats, rubric
from harness.render.plot import draw
from harness.render.view import clean
from harness.wire.status import Status


def finish(args: argparse.Namespace, parser: argparse.ArgumentParser, subject, make, run: Options,
           grade: bool = False) -> int:
    """The checks on `subject` (None for --list-checks) with the options parsed (harness.frontends.options.from_args),
    the report in the asked format; the exit status.  A restart after a crash that cannot be confined as the first
    was raises isolation.IsolationFailed (the caller refuses).  `grade`: this run's report is a grade; on a student's
    own run a class name the file does not define is a command line to correct (exit status 2, one line)."""
    try:
        if args.list_checks:
            for c in select(run.only, run.skip):
                print(f"{c.id:<20} {'(rule) ' if c.kind == 'rule' else ''}{c.claim}")
            return 0
        if not args.target:
            parser.error("give a TARGET to check, e.g. mha-check examples/correct_attention.py")
        suite = instructor.find(args.tests) if args.tests else None
        grading = rubric.load_rubric(args.rubric, {c.id for c in select()}, suite.ids if suite else (),
                                     needs_by_id()) \
            if args.rubric else None
        run = replace(run, rules=not args.no_rules and (grading.rules if grading else True),
                      single_head=grading.single_head if grading else True,
                      kv_cache=grading.kv_cache if grading else False,
                      grouped=grading.grouped if grading else True,
                      last=grading.hidden([c.id for c in select()]) if grading else frozenset())
        report = run_checks(args.target, run, subject=subject, make_subject=make)
        if suite:
            instructor.add_to(report, suite, make, instructor.test_seconds(run.limits))
    except (UsageError, rubric.RubricError, instructor.TestsError) as e:
        if subject is not None:
            subject.close()
        parser.error(str(e))
    mistyped = _named_nothing(report) if not grade else ""
    if mistyped:
        print(f"mha-check: error: {mistyped}", file=sys.stderr)
        return 2
    _say_drawn_seed(run, args.format)
    text = formats.render(report, args.format, grading, args.verbose, args.quiet, _colour(args.format, args.output),
                          on_terminal=not args.output)
    if args.show_output and report.student_output and args.format == "text":
        text += "\n--- what your code printed ---\n" + clean(report.student_output) + "\n"
    if args.plot:
        text += _plot(report, args.plot)
    if args.output:
        try:
            write_atomic(args.output, text)  # a platform reading results.json never sees half of one
        except OSError as e:  # a full disk: the results on stdout, where the platform's log keeps them
            sys.stdout.write(text)
            print(f"mha-check: error: could not write {args.output} ({reason(e)}); the results are printed above "
                  "instead", file=sys.stderr)
            return WRITE_FAILED
    else:
        sys.stdout.write(text)
    return 0 if report.passed else 1


def _named_nothing(report) -> str:
    """The child's words for a class or function name the file does not define ("f01_functional.py has no
    'FuncAtn'. Did you mean FuncAttn? ..."), where construct failed on it alone; "" otherwise.  A student's trial got
    the suggestion, then a failing report of eighteen skipped checks under it."""
    construct = next((c for c in report.checks if c.id == "construct"), None)
    if construct is None or construct.status != Status.FAIL or not construct.details.get("command_line"):
        return ""
    return clean(construct.message.removeprefix("could not load the target: "))


STAFF_FIELDS = ("gradescope", "prairielearn")  # formats with a field students never see: the seed is kept there


def _say_drawn_seed(run: Options, fmt: str) -> None:
    """A seed drawn for this grade (harness.frontends.seeds) where the report has no field only staff see (JSON:
    GitHub Classroom's run; JUnit): on stderr, for the log, so that the grade can be repeated with --seed N."""
    if run.seed_private and fmt not in STAFF_FIELDS:
        print(f"mha-check: seed {run.seed}, drawn at random for this grade (the report does not show it; repeat "
              f"this grade with --seed {run.seed})", file=sys.stderr)


def _colour(fmt: str, output: str | None) -> bool:
    return fmt == "text" and output is None and sys.stdout.isatty() and not os.environ.get("NO_COLOR") and \
        os.environ.get("TERM") != "dumb"


def _plot(report, path: str) -> str:
    maps = report.leakage
    if maps is None or maps.error:
        message = f"no leakage plot: {maps.error if maps else 'the map could not be measured'}"
        print(message, file=sys.stderr)
        return ""
    headline = draw(maps, path, title=report.target)
    print(f"leakage plot written to {os.path.abspath(path)} ({headline})", file=sys.stderr)
    return ""
