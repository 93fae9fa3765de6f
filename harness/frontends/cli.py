"""`mha-check TARGET`: check a student's causal multi-head attention and explain what is wrong.

Exit status: 0 every check passed; 1 a check failed, errored or could not run (including a target that cannot be
imported or built); 2 the command line itself is wrong.  With --format json, stdout carries exactly one JSON object.
"""
from __future__ import annotations

import argparse
import ast
import os
import sys


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # usage mistakes: exit 2 with a one-line message, no traceback
        self.print_usage(sys.stderr)
        print(f"mha-check: error: {message}", file=sys.stderr)
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mha-check", description="Find the bugs in a causal multi-head attention module.",
                epilog="TARGET forms: module:Class, path/to/file.py:Class, path/to/file.py (its single nn.Module "
                       "class); Class may also be a factory function returning a module.")
    p.add_argument("target", nargs="?", help="what to check, e.g. mymodule:MyAttn or attn.py:MyAttn")
    p.add_argument("--format", choices=("text", "json", "gradescope", "junit"), default="text",
                   help="report format (default: text); gradescope writes a results.json, junit an XML test report")
    p.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--rubric", metavar="FILE.toml", help="points and visibility per check (see README)")
    p.add_argument("--only", action="append", default=[], metavar="ID", help="run only these checks (repeatable, "
                                                                             "or comma-separated)")
    p.add_argument("--skip", action="append", default=[], metavar="ID", help="do not run these checks")
    p.add_argument("--seed", type=int, default=0, help="seed for weights and inputs (default 0): same seed, "
                                                       "same verdict")
    p.add_argument("--examples", type=int, default=6, help="generated configurations per check, besides the "
                                                           "two fixed ones (default 6)")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="constructor argument to pass as given (Python literal or string); NAME=@d_out binds it "
                        "to the configuration's width (also @d_in, @heads, @context_length, @dropout, @qkv_bias)")
    p.add_argument("--map", action="append", default=[], metavar="ROLE=NAME",
                   help="say which parameter plays a role when mha-check cannot tell: ROLE is q, k, v, o, qkv "
                        "(fused), bq, bk, bv, bo; NAME a parameter or module name, NAME.T for a matrix used as x @ W")
    p.add_argument("--time-limit", type=float, default=120.0, metavar="SECONDS",
                   help="wall-clock budget for the whole check (default 120; one request gets at most 30)")
    p.add_argument("--memory-mb", type=int, default=3072, help="address-space limit of the checked code (MB)")
    p.add_argument("--plot", metavar="FILE.png", help="also draw the leakage map (needs mha-check[plot])")
    p.add_argument("--list-checks", action="store_true", help="list the check ids with their claims and exit")
    p.add_argument("--show-output", action="store_true", help="print what your code wrote to stdout/stderr")
    p.add_argument("--verbose", "-v", action="store_true", help="show each passing check's finding")
    p.add_argument("--debug", action="store_true", help="include tracebacks of internal errors")
    return p


def _ids(values: list[str]) -> list[str]:
    return [v.strip() for chunk in values for v in chunk.split(",") if v.strip()]


def _overrides(items: list[str], parser) -> dict:
    out = {}
    for item in items:
        name, eq, raw = item.partition("=")
        if not eq or not name.isidentifier():
            parser.error(f"--arg expects NAME=VALUE, got {item!r}")
        try:
            out[name] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            out[name] = raw
    return out


ROLES = ("q", "k", "v", "o", "out", "qkv", "wq", "wk", "wv", "wo", "wqkv", "bq", "bk", "bv", "bo", "bqkv")


def _weight_map(items: list[str], parser) -> dict:
    out = {}
    for item in items:
        role, eq, name = item.partition("=")
        if not eq or role not in ROLES or not name:
            parser.error(f"--map expects ROLE=NAME with ROLE one of {', '.join(ROLES)}; got {item!r}")
        out[role] = name
    return out


SUBCOMMANDS = {"mutants": "harness.frontends.teach", "explain": "harness.frontends.teach", "grade": "harness.frontends.grade",
               "trace": "harness.frontends.trace"}


def main(argv=None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:  # `mha-check mutants | head`: the reader left; end quietly like any other command
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in SUBCOMMANDS:  # `mha-check mutants ...`, `mha-check explain ID`
        import importlib

        return importlib.import_module(SUBCOMMANDS[argv[0]]).main(argv)
    parser = _parser()
    args = parser.parse_args(argv)
    overrides = _overrides(args.arg, parser)
    weight_map = _weight_map(args.map, parser)
    if not 0 <= args.seed < 2 ** 32:
        parser.error("--seed must be between 0 and 4294967295")
    if args.time_limit <= 0 or args.memory_mb < 256:
        parser.error("--time-limit must be positive and --memory-mb at least 256")
    if args.plot:
        from harness.render.plot import require_matplotlib

        try:
            require_matplotlib()
        except RuntimeError as e:
            parser.error(str(e))
    subject = limits = None
    if args.target and not args.list_checks:
        from harness.sandbox.limits import Limits
        from harness.sandbox.subject import Subject

        limits = Limits(call_seconds=min(30.0, args.time_limit), total_seconds=args.time_limit,
                        memory_mb=args.memory_mb)
        subject = Subject(args.target, overrides, args.seed, weight_map=weight_map, limits=limits)  # its torch import overlaps with ours below
    from harness.engine.runner import UsageError, run_checks, select  # after parsing: --help stays instant

    if args.list_checks:
        for c in select():
            print(f"{c.id:<20} {c.claim}")
        return 0
    if not args.target:
        parser.error("give a TARGET to check, e.g. mha-check examples/correct_attention.py:MultiHeadAttention")
    if args.examples < 0:
        parser.error("--examples must be >= 0")
    from harness.render import formats

    try:
        rubric = formats.load_rubric(args.rubric, {c.id for c in select()}) if args.rubric else None
    except formats.RubricError as e:
        subject.close()
        parser.error(str(e))
    try:
        report = run_checks(args.target, _ids(args.only), _ids(args.skip), args.seed, args.examples,
                            overrides, args.debug, subject, weight_map, limits=limits, plot=args.plot)
    except UsageError as e:
        subject.close()
        parser.error(str(e))
    text = formats.render(report, args.format, rubric, args.verbose)
    if args.show_output and report.student_output and args.format == "text":
        text += "\n--- what your code printed ---\n" + report.student_output + "\n"
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
