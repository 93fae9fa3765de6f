"""`mha-check TARGET`: check a student's causal multi-head attention and explain what is wrong.

Exit status: 0 every counted check passed; 1 a check failed, could not be decided or could not run (including a
target that cannot be imported or built); 2 the command line itself is wrong; 3 the report could not be written to
-o (a full disk: it is printed on stdout instead).  With --format json, stdout carries exactly one JSON object.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

from harness import PACKAGES_ROOT
from harness.engine.report import VERSION
from harness.frontends import options
from harness.frontends.writing import WRITE_FAILED, reason, write_atomic
from harness.render.view import clean  # the renderers' rule for text from the student's side (no numpy: cheap)

SUBCOMMANDS = {  # name -> (module, one line for --help)
    "grade": ("harness.frontends.grade", "grade a folder of submissions (one report each, summary.csv)"),
    "trace": ("harness.frontends.trace", "one forward pass step by step, in the lesson's words"),
    "mutants": ("harness.frontends.teach", "the catalogue of known mistakes: the kill matrix, show, export"),
    "explain": ("harness.frontends.teach", "a check or a mistake explained, with a worked example"),
    "autograder": ("harness.frontends.autograder", "build a Gradescope autograder zip (or dry-run one), or GitHub "
                                                   "Classroom's workflow"),
    "result": ("harness.frontends.result", "read a saved JSON report again: the text report, or one check's result"),
}


GRADING_FORMATS = ("gradescope", "prairielearn", "junit")  # a report in these is a grade: confined or refused


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage mistakes: exit 2 with a one-line message, no traceback
        self.print_usage(sys.stderr)
        print(f"mha-check: error: {message}", file=sys.stderr)
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    commands = "\n".join(f"  mha-check {name:<11} {line}" for name, (_, line) in SUBCOMMANDS.items())
    p = _Parser(prog="mha-check", formatter_class=argparse.RawDescriptionHelpFormatter,
                description="Find the bugs in a causal multi-head attention module.",
                epilog="TARGET forms: module:Class, path/to/file.py:Class, path/to/file.py (its attention class), "
                       "lab.ipynb[:Class] (the notebook's definitions only); "
                       "Class may also be a factory function returning a module.\n\nsubcommands "
                       f"(mha-check SUBCOMMAND --help):\n{commands}")
    p.add_argument("target", nargs="?", help="what to check, e.g. mymodule:MyAttn or attn.py:MyAttn")
    p.add_argument("--version", action="version", version=f"mha-check {VERSION}")
    p.add_argument("--format", choices=("text", "json", "gradescope", "prairielearn", "junit"), default="text",
                   help="report format (default: text); gradescope and prairielearn write the platform's results.json, "
                        "junit an XML test report")
    p.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--rubric", metavar="FILE.toml", help="points and visibility per check (see README)")
    p.add_argument("--only", action="append", default=[], metavar="ID", help="run only these checks (repeatable, "
                                                                             "or comma-separated)")
    p.add_argument("--skip", action="append", default=[], metavar="ID", help="do not run these checks")
    p.add_argument("--no-rules", action="store_true", help="the lesson's rules (divisibility, out-proj-bias) are "
                                                           "reported but do not count toward passing")
    p.add_argument("--seed", type=int, default=0, help="seed for weights and inputs (default 0): same seed, "
                                                       "same verdict")
    p.add_argument("--examples", type=int, default=6, help="generated configurations per check, besides the "
                                                           "fixed ones (default 6)")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="constructor argument to pass as given (Python literal or string); NAME=@d_out binds it "
                        "to the configuration's width (also @d_in, @heads, @context_length, @dropout, @qkv_bias)")
    p.add_argument("--map", action="append", default=[], metavar="ROLE=NAME",
                   help="say which parameter plays a role when mha-check cannot tell: ROLE is q, k, v, o, qkv "
                        "(fused), bq, bk, bv, bo; NAME a parameter or module name, NAME.T for a matrix used as x @ W")
    p.add_argument("--time-limit", type=float, default=120.0, metavar="SECONDS",
                   help="wall-clock budget for the whole check (default 120; one request gets at most 30)")
    p.add_argument("--memory-mb", type=int, default=3072, help="memory of the checked code (MB, default "
                                                               "3072; torch's libraries come on top)")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the leakage map (needs mha-check[plot])")
    p.add_argument("--list-checks", action="store_true", help="list the check ids with their claims and exit")
    p.add_argument("--show-output", action="store_true", help="print what your code wrote to stdout/stderr")
    p.add_argument("--verbose", "-v", action="store_true", help="every detail of every check")
    p.add_argument("--quiet", "-q", action="store_true", help="one line per check")
    p.add_argument("--debug", action="store_true", help="include tracebacks of internal errors")
    p.add_argument("--grading", action="store_true",
                   help="this run's report is a grade (implied by --format gradescope, prairielearn and junit): "
                        "refuse, in one line, where the code cannot be confined well enough to grade it")
    p.add_argument("--allow-unconfined", action="store_true",
                   help="grade even where the code cannot be confined well enough (the outputs say so)")
    return p


def trusted_path() -> None:
    """`python -m harness.frontends.cli` puts the working folder first on sys.path, so that a student's
    `reference.py` or `checks.py` there would be imported by the trusted side in place of ours (the checks and the
    reference are imported after start-up).  Only our own root may stay; the console script never adds it."""
    here = os.path.abspath(os.getcwd())
    if here != os.path.abspath(PACKAGES_ROOT):
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]


def _as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv=None) -> int:
    trusted_path()
    # SIGTERM (`timeout`, a scheduler's stop) as Ctrl-C: the child and its scratch, a copy of the submission, are
    # removed on the way out (the caller's handler is back afterwards, for a call from another program)
    previous = signal.signal(signal.SIGTERM, _as_interrupt) if threading.current_thread() is \
        threading.main_thread() else None
    try:
        return _main(argv)
    except BrokenPipeError:  # `mha-check mutants | head`: the reader left; end quietly like any other command
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:  # Ctrl-C: the child was stopped and its scratch removed on the way out
        print("\nmha-check: interrupted", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _early_template(argv: list[str]):
    """`mha-check grade`'s warm template (harness.sandbox.template), started before the grade module and what it
    imports (the engine, the checks, numpy: about 0.3 s), which are then imported while the template imports torch,
    the batch's longest wait.  None for --help and --merge, which need none, or where it cannot start (grade then
    tries again, and falls back to a zygote per grader).  grade closes it, on every path."""
    if {"-h", "--help", "--merge"} & set(argv[1:]):
        return None
    from harness.sandbox.template import Template  # noqa: PLC0415 - start-up: only grade starts one

    try:
        return Template()
    except OSError:
        return None


def _colour(fmt: str, output: str | None) -> bool:
    return fmt == "text" and output is None and sys.stdout.isatty() and not os.environ.get("NO_COLOR") and \
        os.environ.get("TERM") != "dumb"


def _main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in SUBCOMMANDS:  # `mha-check mutants ...`, `mha-check explain ID`
        import importlib  # noqa: PLC0415 - a subcommand's module is loaded only when it is asked for

        if argv[0] == "grade":
            template = _early_template(argv)  # before grade's imports: torch imports meanwhile
            try:
                grade = importlib.import_module(SUBCOMMANDS["grade"][0])
            except BaseException:  # Ctrl-C during the import: grade never took the template, so close it here
                if template is not None:
                    template.close()
                raise
            return grade.main(argv, template)
        return importlib.import_module(SUBCOMMANDS[argv[0]][0]).main(argv)
    parser = _parser()
    args = parser.parse_args(argv)
    overrides = options.constructor_args(args.arg, parser)
    weight_map = options.weight_map(args.map, parser)
    options.limits(args.time_limit, args.memory_mb, args.examples, args.seed, parser)
    _check_output(args.output, parser)
    if args.plot:
        from harness.render.plot import require_matplotlib  # noqa: PLC0415 - matplotlib is optional

        try:
            require_matplotlib()
        except RuntimeError as e:
            parser.error(str(e))
    subject = limits = make = None
    from harness.sandbox.limits import Limits  # noqa: PLC0415 - after parsing: --help stays instant
    from harness.sandbox import pool  # noqa: PLC0415

    isolation = pool.isolation  # the walls' verdicts on a child (imported by pool already)
    a_grade = args.grading or args.format in GRADING_FORMATS  # (`grading` below is the rubric)
    if args.target and not args.list_checks:
        limits = Limits(call_seconds=min(30.0, args.time_limit), total_seconds=args.time_limit,
                        memory_mb=args.memory_mb)
        make = lambda: pool.single_run(args.target, overrides=overrides, seed=args.seed,
                                       weight_map=weight_map, limits=limits, grading=a_grade,
                                       allow_unconfined=args.allow_unconfined or not a_grade)
        try:
            subject = make()  # its torch import (if any: see single_run) overlaps with ours below
        except isolation.IsolationFailed as e:
            return _refuse(isolation.refusal_line([isolation.explain(str(e))]), a_grade)
        _say_how_confined(subject, a_grade, isolation)
    from harness.engine.runner import Options, UsageError, run_checks, select  # noqa: PLC0415
    from harness.render import formats, rubric  # noqa: PLC0415

    try:
        if args.list_checks:
            for c in select(options.ids(args.only), options.ids(args.skip)):
                print(f"{c.id:<20} {'(rule) ' if c.kind == 'rule' else ''}{c.claim}")
            return 0
        if not args.target:
            parser.error("give a TARGET to check, e.g. mha-check examples/correct_attention.py")
        grading = rubric.load_rubric(args.rubric, {c.id for c in select()}) if args.rubric else None
        run = Options(options.ids(args.only), options.ids(args.skip), args.seed, args.examples, overrides,
                      weight_map, limits, rules=not args.no_rules and (grading.rules if grading else True),
                      leakage_map=bool(args.plot), debug=args.debug)
        report = run_checks(args.target, run, subject=subject, make_subject=make)
    except isolation.IsolationFailed as e:  # a restart after a crash could not be confined as the first was
        return _refuse(isolation.refusal_line([isolation.explain(str(e))]), a_grade)
    except (UsageError, rubric.RubricError) as e:
        if subject is not None:
            subject.close()
        parser.error(str(e))
    text = formats.render(report, args.format, grading, args.verbose, args.quiet, _colour(args.format, args.output))
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


def _plot(report, path: str) -> str:
    from harness.render.plot import draw  # noqa: PLC0415 - matplotlib is optional

    maps = report.leakage or {}
    if "panels" not in maps:
        message = f"no leakage plot: {maps.get('error', 'the map could not be measured')}"
        print(message, file=sys.stderr)
        return ""
    headline = draw(maps, path, title=report.target)
    print(f"leakage plot written to {os.path.abspath(path)} ({headline})", file=sys.stderr)
    return ""


def _check_output(path: str | None, parser) -> None:
    """-o to a folder, or into a folder that does not exist, is a usage error before any work."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        parser.error(f"-o {path}: that is a folder; give a file name")
    if not os.path.isdir(folder):
        parser.error(f"-o {path}: the folder {folder} does not exist")


if __name__ == "__main__":
    sys.exit(main())
