"""`mha-check TARGET`: check a student's causal multi-head attention and explain what is wrong.

Exit status: 0 every check passed; 1 a check failed, errored or could not run (including a target that cannot be
imported or built); 2 the command line itself is wrong.  With --format json, stdout carries exactly one JSON object.
"""
from __future__ import annotations

import argparse
import ast
import signal
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
    p.add_argument("--format", choices=("text", "json"), default="text", help="report format (default: text)")
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


SUBCOMMANDS = {"mutants": "harness.teach", "explain": "harness.teach"}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if hasattr(signal, "SIGPIPE"):  # `mha-check mutants | head` ends quietly, like any other command
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    if argv and argv[0] in SUBCOMMANDS:  # `mha-check mutants ...`, `mha-check explain ID`
        import importlib

        return importlib.import_module(SUBCOMMANDS[argv[0]]).main(argv)
    parser = _parser()
    args = parser.parse_args(argv)
    overrides = _overrides(args.arg, parser)
    weight_map = _weight_map(args.map, parser)
    subject = None
    if args.target and not args.list_checks:
        from harness.subject import Subject

        subject = Subject(args.target, overrides, args.seed, weight_map=weight_map)  # its torch import overlaps with ours below
    from harness.runner import UsageError, run_checks, select  # after parsing: --help stays instant

    if args.list_checks:
        for c in select():
            print(f"{c.id:<20} {c.claim}")
        return 0
    if not args.target:
        parser.error("give a TARGET to check, e.g. mha-check examples/correct_attention.py:MultiHeadAttention")
    if args.examples < 0:
        parser.error("--examples must be >= 0")
    try:
        report = run_checks(args.target, _ids(args.only), _ids(args.skip), args.seed, args.examples,
                            overrides, args.debug, subject, weight_map)
    except UsageError as e:
        subject.close()
        parser.error(str(e))
    if args.format == "json":
        sys.stdout.write(report.to_json() + "\n")
    else:
        print(report.to_text(args.verbose))
        if args.show_output and report.student_output:
            print("\n--- what your code printed ---\n" + report.student_output)
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
