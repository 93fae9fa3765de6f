"""`mha-check trace TARGET`: one forward pass of the lesson's worked example, step by step, in the lesson's words.

Every torch operation with its shapes, named by the lesson's steps, the known mistakes marked where they show,
then the lesson's arithmetic for the target (see harness.engine.trace for the analysis).
"""
from __future__ import annotations

import argparse
import sys

from harness.engine.context import Context
from harness.engine.trace.drive import count_parameters, record, withhold_under_a_guessed_call
from harness.engine.trace.result import TraceResult, arithmetic
from harness.engine.trace.vocabulary import WORKED
from harness.frontends.api import resolved_target
from harness.engine.options import command_words
from harness.frontends import typed_target
from harness.frontends.options import constructor_args
from harness.frontends.options import weight_map as role_map
from harness.render.trace_text import render
from harness.sandbox.pool import single_run
from harness.wire.errors import CannotDrive, TargetFailure, WorkerDied


def trace(target, *, n: int = 1024, batch: int = 1, heads: int | None = None, d: int | None = None,
          qkv_bias: bool = False, seed: int = 0, args: dict | None = None, weight_map: dict | None = None,
          source: bool | None = None, make_subject=single_run) -> TraceResult:
    """Trace one forward pass of the lesson's worked example through `target` (any form `harness.check`
    takes); the arithmetic is for width `d` (default 8), `heads` heads (default 2), Q/K/V biases or not, and a
    score tensor of `batch` sequences of `n` tokens.  `make_subject(spec, overrides=, seed=, weight_map=)` starts
    the child: a single run's by default (`harness.sandbox.pool.single_run`); tracing many targets can fork each
    from a warm zygote instead (`Subject(spec, start=harness.sandbox.pool.Fork(zygote), ...)`)."""
    a_d, a_heads = d or WORKED["d"], heads or WORKED["heads"]
    with resolved_target(target, source) as resolved:
        subject = make_subject(resolved.spec, overrides=dict(args or {}), seed=seed,
                               weight_map=dict(weight_map or {}))
        try:
            ctx = Context(subject, seed)
            result = record(ctx, resolved.display)
            result.options = command_words(args, weight_map)  # (its notes' commands need them already)
            withhold_under_a_guessed_call(ctx, result)
            result.notes[:0] = list(resolved.notes)
            out_proj = True if result.error else ctx.form.out_proj  # single head: one head, no W_o
            a_heads = a_heads if result.error or ctx.form.heads is None else ctx.form.heads
            qkv_bias = qkv_bias or any(value is True and "bias" in name.lower() and "out" not in name.lower()
                                       for name, value in (args or {}).items())  # traced as the report's command
            # asks (--arg qkv_bias=True): the arithmetic of that build, not "no Q/K/V biases" (student trial 19)
            counted, note, biases = (None, "", None) if result.error else count_parameters(ctx, a_d, a_heads,
                                                                                             qkv_bias, n)
        except (TargetFailure, CannotDrive, WorkerDied) as e:
            result = TraceResult(resolved.display, "", dict(WORKED), error=e.message)
            counted, note, out_proj, biases = None, "", True, None
        finally:
            subject.close()
    result.arithmetic = arithmetic(a_d, a_heads, n, batch, qkv_bias, counted, note, out_proj, biases)
    result.options = command_words(args, weight_map)
    return result


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"mha-check trace: error: {message}", file=sys.stderr)
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="mha-check trace", description=(
        "Run one forward pass of the lesson's worked example (d=8, 2 heads, 3 tokens, batch 2) through TARGET and "
        "show every tensor operation named by the lesson's steps, marking known mistakes; then the lesson's "
        "arithmetic for the target."), epilog="Exit status: 0 no known mistake shows; 1 a mistake is marked or the "
                                              "target could not be traced; 2 the command line is wrong.")
    p.add_argument("target", help="what to trace, e.g. attn.py:MyAttn (the same forms as mha-check TARGET)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument("--n", type=int, default=1024, help="tokens per sequence for the score-memory figures "
                                                       "(default 1024)")
    p.add_argument("--batch", type=int, default=1, help="sequences for the score-memory figures (default 1)")
    p.add_argument("--heads", type=int, default=None, help="heads for the arithmetic (default 2, as traced)")
    p.add_argument("--d", type=int, default=None, help="width for the arithmetic (default 8, as traced)")
    p.add_argument("--qkv-bias", action="store_true", help="count Q/K/V biases in the arithmetic (GPT-2 has them)")
    p.add_argument("--wide", action="store_true", help="one row per operation with the shapes in numbers and in "
                                                       "letters and your line side by side (about 260 columns)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="constructor argument, as for mha-check TARGET")
    p.add_argument("--map", action="append", default=[], metavar="ROLE=NAME",
                   help="which parameter plays a role, as for mha-check TARGET (a report's `see also: mha-check "
                        "trace ...` carries the run's --map)")
    return p


def main(argv=None) -> int:
    """`mha-check trace TARGET [--format json] [--wide] [--n N] [--batch B] [--heads H] [--d D] [--qkv-bias]`.

    `argv` may start with the word "trace" (the CLI hands over the whole command line)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["trace"]:
        argv = argv[1:]
    parser = _parser()
    args = parser.parse_args(argv)
    for name in ("n", "batch", "heads", "d"):
        value = getattr(args, name)
        if value is not None and value < 1:
            parser.error(f"--{name} must be at least 1")
    overrides, roles = constructor_args(args.arg, parser), role_map(args.map, parser)
    mistyped = typed_target.problem(args.target) or typed_target.arg_problem(args.target, overrides)  # a trace is a
    if mistyped:  # student's own run, never a grade
        print(f"mha-check trace: error: {mistyped}", file=sys.stderr)
        return 2
    result = trace(args.target, n=args.n, batch=args.batch, heads=args.heads, d=args.d, qkv_bias=args.qkv_bias,
                   seed=args.seed, args=overrides, weight_map=roles)
    sys.stdout.write(result.to_json() + "\n" if args.format == "json" else render(result, args.wide) + "\n")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
