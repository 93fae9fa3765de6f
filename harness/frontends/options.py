"""Options every front end shares, parsed and validated in one place: a bad value is a usage error that names the
option and the limit (exit status 2), never a traceback and never the student's failure."""
from __future__ import annotations

import ast
import math

from harness.engine.options import Options
from harness.frontends import seeds
from harness.sandbox.limits import MEMORY_FLOOR_MB, Limits
from harness.wire.target import nearly

ROLES = ("q", "k", "v", "o", "out", "qkv", "wq", "wk", "wv", "wo", "wqkv", "bq", "bk", "bv", "bo", "bqkv")
BINDABLE = ("d", "width", "d_in", "d_out", "heads", "context_length", "dropout", "qkv_bias", "head_width", "kv_heads",
            "kv_group")


class OptionError(ValueError):
    """A command-line value that cannot be used; the message names it."""


def ids(values) -> list[str]:
    """Check ids from repeated and comma-separated options: ["a,b", "c"] -> ["a", "b", "c"]."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [v.strip() for chunk in values for v in str(chunk).split(",") if v.strip()]


def constructor_args(items, parser=None) -> dict:
    """--arg NAME=VALUE (a Python literal, else a string); NAME=@key binds to the configuration's value."""
    out = {}
    for item in items:
        name, eq, raw = item.partition("=")
        if not eq or not name.isidentifier():
            _error(parser, f"--arg expects NAME=VALUE, got {item!r}")
        if raw.startswith("@") and raw[1:] not in BINDABLE:
            near = nearly(raw[1:], BINDABLE, cutoff=0.6)
            _error(parser, f"--arg {name}={raw}: @ binds to one of {', '.join('@' + b for b in BINDABLE)}"
                           + (f"; did you mean @{near}?" if near else ""))
        try:
            out[name] = ast.literal_eval(raw)
        except (ValueError, SyntaxError, RecursionError, MemoryError):
            if raw in BINDABLE:  # the text "d_out" passed to the constructor: the @ forgotten (a student's trial got
                # "FAIL: your code raised TypeError: unsupported operand type(s) for //: 'str' and 'str'")
                _error(parser, f"--arg {name}={raw} would pass the text {raw!r}; to bind {name} to the "
                               f"configuration's {raw}, write --arg {name}=@{raw} (or {name}='{raw}' for the text)")
            out[name] = raw
    return out


def weight_map(items, parser=None) -> dict:
    """--map ROLE=NAME: which of the student's parameters plays a role."""
    out = {}
    for item in items:
        role, eq, name = item.partition("=")
        if not eq or role not in ROLES or not name:
            _error(parser, f"--map expects ROLE=NAME with ROLE one of {', '.join(ROLES)}; got {item!r}")
        out[role] = name
    return out


def limits(time_limit: float, memory_mb: int, examples: int | None = None, seed: int | None = None,
           parser=None, output_mb: int = Limits.file_mb) -> None:
    """The limits a run may be given: positive, finite, enough memory for torch to import, and no more output than
    a grader's disk can hold for every child at once."""
    if not (math.isfinite(time_limit) and time_limit > 0):
        _error(parser, f"--time-limit must be a positive number of seconds, not {time_limit}")
    if memory_mb < MEMORY_FLOOR_MB:
        _error(parser, f"--memory-mb must be at least {MEMORY_FLOOR_MB} (importing torch alone needs about 220 MB, "
                       f"and the checks' tensors more), not {memory_mb}")
    if not 1 <= output_mb <= OUTPUT_CEILING_MB:
        _error(parser, f"--output-limit must be between 1 and {OUTPUT_CEILING_MB} MB (what the code may print, and "
                       f"the largest file it may write), not {output_mb}")
    if examples is not None and examples < 1:
        _error(parser, f"--examples must be at least 1, not {examples}")
    if seed is not None and not 0 <= seed < seeds.SEED_LIMIT:
        _error(parser, f"--seed must be between 0 and {seeds.SEED_LIMIT - 1}, not {seed}")


SHARED = ("seed", "examples", "arg", "map", "time-limit", "memory-mb", "output-limit", "tests")
OUTPUT_CEILING_MB = 1024  # --output-limit's largest: each child's printed output lies on the grader's disk


def add_shared(p, names=SHARED, per: str = "the whole check") -> None:
    """The options several front ends take (mha-check, grade, autograder), declared once: the same name, type,
    default and words everywhere; `per` says what the time and memory are for ("each submission" in grade)."""
    many = {"action": "append", "default": []}
    declared = {
        "seed": {"type": int, "default": None,
                 "help": "seed for weights and inputs: same seed, same verdict.  Default: 0 when you check your own "
                         "code; a grade (grade, --format gradescope, prairielearn, junit, --grading) uses one "
                         "drawn at random that students cannot know, kept only where staff look (repeat that grade "
                         "with --seed N)"},
        "examples": {"type": int, "default": 6,
                     "help": "generated configurations per check, besides the fixed ones (default 6)"},
        "arg": {**many, "metavar": "NAME=VALUE",
                "help": "constructor argument to pass as given (Python literal or string); NAME=@d_out binds it to "
                        "the configuration's width (also @d_in, @heads, @context_length, @dropout, @qkv_bias)"},
        "map": {**many, "metavar": "ROLE=NAME",
                "help": "say which parameter plays a role when mha-check cannot tell: ROLE is q, k, v, o, qkv "
                        "(fused), bq, bk, bv, bo; NAME a parameter or module name, NAME.T for a matrix used as x @ W "
                        "(a 3-D parameter with a heads axis is read as one matrix per head)"},
        "time-limit": {"type": float, "default": Limits.total_seconds, "metavar": "SECONDS",
                       "help": f"wall-clock seconds for {per}, counted only while your code runs (not while "
                               f"mha-check computes between its calls; default {Limits.total_seconds:g}, one call at "
                               f"most {Limits.call_seconds:g})"},
        "memory-mb": {"type": int, "default": Limits.memory_mb,
                      "help": f"memory in MB for {per} (default {Limits.memory_mb}; torch's libraries come on top)"},
        "output-limit": {"type": int, "default": Limits.file_mb, "metavar": "MB",
                         "help": f"what the code may print, in MB, in {per} (default {Limits.file_mb}, at most "
                                 f"{OUTPUT_CEILING_MB}); also the largest file it may write.  Past it the run stops "
                                 "and its checks cannot tell (needs review): raise it for code that prints a lot"},
        "tests": {**many, "metavar": "PATH",
                  "help": "the instructor's own pytest file, or a folder of them (repeatable): run beside the checks "
                          "in the same confinement, the class checked given as the student_class fixture; each test "
                          "one rubric item (its points: [tests.\"FILE::NAME\"] in the rubric, default_points else)"},
    }
    for name in names:
        p.add_argument(f"--{name}", **declared[name])


def from_args(args, parser=None, grading: str = "", **more) -> Options:
    """The run the shared options ask for (seed, examples, arg, map, time-limit, memory-mb), validated: the one place
    a single run, grade and the autograder turn their command line into `Options`.  `grading`: where a grade keeps
    its seed when none is given (seeds.STAFF, seeds.FOLDER; "" for a student checking their own code, seed 0): one
    is then drawn (harness.frontends.seeds).  `more`: what only that front end has (a single run's --only, --skip,
    --plot, --debug), by keyword.  A bad value ends through `parser` (status 2), or raises OptionError without
    one."""
    overrides, roles = constructor_args(args.arg, parser), weight_map(args.map, parser)
    output_mb = getattr(args, "output_limit", Limits.file_mb)  # (a front end without the option: the default)
    limits(args.time_limit, args.memory_mb, args.examples, args.seed, parser, output_mb)
    seed, private = (args.seed, "") if args.seed is not None else (seeds.draw(), grading) if grading else (0, "")
    return Options(seed=seed, seed_private=private, examples=args.examples, overrides=overrides, weight_map=roles,
                   limits=run_limits(args.time_limit, args.memory_mb, output_mb), **more)


def run_limits(time_limit: float, memory_mb: int, output_mb: int = Limits.file_mb) -> Limits:
    """--time-limit, --memory-mb and --output-limit as the child's limits: one request gets at most 30 s of the
    whole; what it prints counts against the file-size limit (RLIMIT_FSIZE: its captured output is a file)."""
    return Limits(call_seconds=min(Limits.call_seconds, time_limit), total_seconds=time_limit, memory_mb=memory_mb,
                  file_mb=output_mb)


def _error(parser, message: str):
    if parser is not None:
        parser.error(message)
    raise OptionError(message)
