"""`mha-check TARGET`: check a student's causal multi-head attention and explain what is wrong.

Exit status: 0 every counted check passed; 1 a check failed, could not be decided or could not run (including a
target that cannot be imported or built); 2 the command line itself is wrong (on a student's own run, not a grade, a
target that names no file, a folder, or a class the file does not define, too); 3 the report could not be written to
-o (a full disk: it is printed on stdout instead).  With --format json, stdout carries exactly one JSON object.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading

# mha-check's own process computes the reference in numpy on one thread per configuration (harness.engine.together),
# and `grade` runs one grader per core: OpenBLAS's threads on top of those oversubscribe the cores, and its waiting
# threads spin.  On this project's 2-core machine under load, the float32 probe's reference (a batch of 16, 63 tokens,
# 4 heads 64 wide) took 4.7 s forward and backward with OpenBLAS's threads and 0.8 s without (docs/benchmarks.md,
# 2026-12-07).  Set here, before anything imports numpy, and not in `harness`: a notebook that imports harness keeps
# its own numpy's threads.  A caller's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from harness.wire import names

if __name__ == "__main__":  # `python -m harness.frontends.cli` put the working folder first on sys.path: off it
    names.trusted_path()  # before the next line imports `checks` (a student's checks.py there would run here)

from harness.engine.report import VERSION  # after trusted_path, above
from harness.frontends import options as option_rules
from harness.sandbox import reaper

SUBCOMMANDS = {  # name -> (module, one line for --help)
    "grade": ("harness.frontends.grade", "grade a folder of submissions (reports, summary.csv, class-report.html)"),
    "trace": ("harness.frontends.trace", "one forward pass step by step, in the lesson's words"),
    "mutants": ("harness.frontends.teach", "the catalogue of known mistakes: the kill matrix, show, export"),
    "explain": ("harness.frontends.teach", "a check or a mistake explained, with a worked example"),
    "autograder": ("harness.frontends.autograder", "build a Gradescope autograder zip (or dry-run one), or GitHub "
                                                   "Classroom's workflow"),
    "result": ("harness.frontends.result", "read a saved JSON report again: the text report, or one check's result"),
}


SINGLE_RUN = "harness.frontends.single"  # `mha-check TARGET` once parsed: loaded, as a subcommand is, only for a run


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
    p.add_argument("--rubric", metavar="FILE.toml", help="points and visibility per check (see docs/grading.md)")
    p.add_argument("--only", action="append", default=[], metavar="ID", help="run only these checks (repeatable, "
                                                                             "or comma-separated)")
    p.add_argument("--skip", action="append", default=[], metavar="ID", help="do not run these checks")
    p.add_argument("--no-rules", action="store_true", help="the lesson's rules (divisibility, mask-fill, "
                                                           "out-proj-bias) are reported but do not count toward "
                                                           "passing; a fill that leaks at the scores a model "
                                                           "reaches (-1e4, -100) is a causal leak, not mask-fill's "
                                                           "rule (which holds a fill only enormous scores pass, -1e9)")
    option_rules.add_shared(p, ("seed", "examples", "arg", "map", "time-limit", "memory-mb", "output-limit"))
    p.add_argument("--plot", metavar="FILE.png", help="also draw the leakage map (needs mha-check[plot])")
    p.add_argument("--list-checks", action="store_true", help="list the check ids with their claims and exit")
    p.add_argument("--show-output", action="store_true", help="print what your code wrote to stdout/stderr")
    p.add_argument("--verbose", "-v", action="store_true", help="every detail of every check")
    p.add_argument("--quiet", "-q", action="store_true", help="one line per check")
    p.add_argument("--debug", action="store_true", help="include tracebacks of internal errors")
    option_rules.add_shared(p, ("tests",))
    p.add_argument("--grading", action="store_true",
                   help="this run's report is a grade (implied by --format gradescope, prairielearn and junit): "
                        "refuse, in one line, where the code cannot be confined well enough to grade it")
    p.add_argument("--allow-unconfined", action="store_true",
                   help="grade even where the code cannot be confined well enough (the outputs say so)")
    return p


def _as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


class _Deferred:
    """Ctrl-C and SIGTERM while mha-check starts (the warm template is launched, numpy and the engine import):
    noted here and acted on once the imports are done (`interruptible`).  A KeyboardInterrupt raised in the middle
    of an import leaves a half-initialised module behind (numpy's C extension then fails with an ImportError and a
    traceback), and one raised inside a fork handler or a finaliser is swallowed by Python; both were seen, about
    one start in five under load, with exit statuses 1 and -2 instead of 130."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum, frame) -> None:
        self.signum = self.signum or signum

    def interruptible(self) -> None:
        """From here on Ctrl-C and SIGTERM interrupt (KeyboardInterrupt), and one that came meanwhile does now."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, _as_interrupt)
        if self.signum is not None:
            raise KeyboardInterrupt


def main(argv=None) -> int:
    names.trusted_path()  # harness.wire.names, defence 1 (for a caller that has the working folder on sys.path)
    # SIGTERM (`timeout`, a scheduler's stop) as Ctrl-C: the child and its scratch, a copy of the submission, are
    # removed on the way out; both wait until the imports are done (_Deferred).  The caller's handlers are back
    # afterwards, for a call from another program.
    deferred, previous = _Deferred(), {}
    if threading.current_thread() is threading.main_thread():
        previous = {signum: signal.signal(signum, deferred) for signum in (signal.SIGINT, signal.SIGTERM)}
    reaper.adopt()  # every process of ours is gone when this returns, a zygote whose grader ended too (settle)
    try:
        return _main(argv, deferred)
    except BrokenPipeError:  # `mha-check mutants | head`: the reader left; end quietly like any other command
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:  # Ctrl-C: the child was stopped and its scratch removed on the way out
        print("\nmha-check: interrupted", file=sys.stderr)
        return 130
    finally:
        reaper.settle()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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


def _main(argv=None, deferred: _Deferred | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    deferred = deferred or _Deferred()
    if argv and argv[0] in SUBCOMMANDS:  # `mha-check mutants ...`, `mha-check explain ID`
        if argv[0] == "grade":
            template = _early_template(argv)  # before grade's imports: torch imports meanwhile
            try:
                grade = importlib.import_module(SUBCOMMANDS["grade"][0])
                deferred.interruptible()
            except BaseException:  # interrupted while starting: grade never took the template, so close it here
                if template is not None:
                    template.close()
                raise
            return grade.main(argv, template)
        command = importlib.import_module(SUBCOMMANDS[argv[0]][0])
        deferred.interruptible()
        return command.main(argv)
    parser = _parser()
    args = parser.parse_args(argv)
    single = importlib.import_module(SINGLE_RUN)
    deferred.interruptible()
    return single.run(args, parser)


if __name__ == "__main__":
    sys.exit(main())
