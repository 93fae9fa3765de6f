"""Configurations: the required ones first, then seeded draws, and the smallest failing one found.

`find_failure(ctx, prop)` returns None when `prop(config)` (None for "fine", an Outcome for "broken") holds on the
required configurations and on `ctx.examples` drawn ones; otherwise the failing Outcome for the smallest failing
configuration found, with that configuration attached.  The required and drawn configurations are asked
together (`harness.engine.together`: each property straight-line code of its own, their round trips in one frame
per step, the verdict that of asking them one at a time in this order); a shrink asks one at a time.

Draws come from a generator seeded by what is drawn (the same configurations in every run and on every machine,
whatever the seed of the inputs): first the smallest configuration of all, then random ones, all distinct.  A
failing configuration, required or drawn, is shrunk here (`shrink`), greedily: most mistakes show with two tokens
and every width at its minimum, so this costs 3 to 5 calls.

Why not hypothesis, which drew and shrank here before: in a single run it cost about 0.3 s of the trusted side's
CPU (its import, its engine, and, in an editable install, a scan of the source of every local module for
constants to draw), more than all of the checks' own work there, for draws that are plain uniform choices and a
shrink that the greedy descent does in fewer calls.
"""
from __future__ import annotations

import functools
import zlib

import numpy as np

from harness.engine.together import Together
from harness.wire.config import Config
from harness.wire.status import Status


def draws(separate: bool, qkv_bias: bool, min_heads: int = 1, min_n: int = 1, examples: int = 6,
          fixed_heads: int | None = None, head_width: int | None = None) -> list[Config]:
    """`examples` distinct configurations: the smallest first, then uniform draws.  Widths as real layers accept
    them: head widths even (rotary embeddings need that), d_in a multiple of the heads (some layers demand it; the
    lesson allows any d_in, and nothing in the lesson's layer depends on it).  `fixed_heads`: the form's own number
    of heads (harness.wire.form: 1 for a single-head layer), whatever `min_heads` asks; head widths up to 8.
    `head_width`: the narrowest head the class accepts where it refuses narrow ones by design (Context.head_width):
    head widths are then that width or twice it; None (every class that builds narrow heads) draws as before."""
    if fixed_heads is not None:
        return list(_draws(separate, qkv_bias, fixed_heads, min_n, examples, True, head_width))
    return list(_draws(separate, qkv_bias, min_heads, min_n, examples, False, head_width))


@functools.lru_cache(maxsize=64)  # the same few keys, asked about a dozen times per target, in every target of a batch
def _draws(separate: bool, qkv_bias: bool, min_heads: int, min_n: int, examples: int,
           fixed: bool = False, wide: int | None = None) -> tuple[Config, ...]:
    key = (separate, qkv_bias, min_heads, min_n) + ((True,) if fixed else ()) + ((wide,) if wide else ())
    rng = np.random.default_rng([zlib.crc32(repr(key).encode())])
    low_ctx = max(2, min_n)

    def draw() -> Config:
        heads = min_heads if fixed else int(rng.integers(min_heads, max(4, min_heads) + 1))
        d_out = heads * int(rng.choice((wide, 2 * wide) if wide else (2, 4, 6, 8) if fixed else (2, 4)))
        d_in = heads * int(rng.integers(1, 4)) if separate else d_out
        context_length = int(rng.integers(low_ctx, max(10, low_ctx) + 1))
        return Config(d_in=d_in, d_out=d_out, heads=heads, context_length=context_length,
                      batch=int(rng.integers(2, 4)), n=int(rng.integers(min_n, context_length + 1)),
                      qkv_bias=bool(rng.integers(0, 2)) if qkv_bias else False)

    smallest = Config(d_in=min_heads * (1 if separate else wide or 2), d_out=(wide or 2) * min_heads,
                      heads=min_heads, context_length=low_ctx, batch=2, n=min_n)
    out = [smallest][:examples]
    for _ in range(50 * examples):
        if len(out) >= examples:
            break
        cfg = draw()
        if cfg not in out:
            out.append(cfg)
    return tuple(out)


def _attach(outcome, cfg: Config):
    if outcome.config is None:
        outcome.config = cfg.to_dict()
    return outcome


def _fixed_heads(ctx) -> int | None:
    """The number of heads the target's form fixes (a single-head layer: 1), or None."""
    form = getattr(ctx, "form", None)
    return getattr(form, "heads", None)


def find_failure(ctx, prop, min_heads: int = 1, min_n: int = 1, generated: bool = True, required=None, after=()):
    """The required configurations and the drawn ones are asked together (`together`: their round trips in one
    frame per step, with the verdict of asking one at a time, in this order); a shrink asks one at a time.
    `after`: configurations asked in the same frames, judged after the drawn ones (reference-match's float32
    probe: a failure of the float64 configurations is the one reported, as before it existed); a failing one is
    shrunk, an undecided one (cannot tell) is returned as it is."""
    asked: dict[Config, object] = {}  # every configuration is asked about once, drawn or tried while shrinking
    fixed = _fixed_heads(ctx)
    min_heads = fixed or min_heads  # shrinking never goes below it, and never changes a fixed number
    required = list(required if required is not None else ctx.required_configs())
    wide = getattr(ctx, "head_width", None)  # narrow heads refused by design (Context.head_width): none drawn
    drawn = draws(ctx.separate_widths, ctx.accepts("qkv_bias"), min_heads, min_n, ctx.examples, fixed, wide) \
        if generated else []
    after = list(after)
    early = together(ctx, prop, list(dict.fromkeys(required + drawn + after)))

    def answer(cfg: Config):  # what the configurations asked together said, else asked now
        found = early.pop(cfg) if cfg in early else prop(cfg)
        if isinstance(found, BaseException):
            raise found
        return found

    def ask(cfg: Config):
        if cfg not in asked:
            found = answer(cfg)
            asked[cfg] = None if found is None else _attach(found, cfg)
        return asked[cfg]

    for cfg in required:
        outcome = ask(cfg)
        if outcome is not None:
            return shrink(outcome, cfg, answer, min_heads, min_n, ctx.separate_widths, asked, wide) if generated \
                else outcome
    for cfg in drawn:
        outcome = ask(cfg)
        if outcome is not None:
            return shrink(outcome, cfg, answer, min_heads, min_n, ctx.separate_widths, asked, wide)
    for cfg in after:
        outcome = ask(cfg)
        if outcome is not None:
            return shrink(outcome, cfg, answer, min_heads, min_n, ctx.separate_widths, asked, wide) \
                if outcome.status == Status.FAIL else outcome
    return None


def together(ctx, prop, configs: list[Config]) -> dict:
    """{configuration: outcome, or the exception its property raised}, asked together (Together.run); {} where
    there is no child to gather frames for (the search then asks one at a time), or where a property asks (a
    search inside one: its frames already go with the others)."""
    subject = getattr(ctx, "subject", None)
    if subject is None or not hasattr(subject, "frame_now") or subject.gather is not None:
        return {}
    subject.gather = Together(subject)
    try:
        return subject.gather.run(prop, configs)
    finally:
        subject.gather = None


def shrink(outcome, cfg: Config, prop, min_heads: int, min_n: int, separate: bool, asked: dict | None = None,
           wide: int | None = None):
    """The failing `outcome` of `cfg`, moved to the smallest failing configuration a greedy descent reaches.

    First everything at its minimum with two tokens (where most mistakes show); then, field by field, the smallest
    value that still fails (its minimum, else a bisection between it and the current value, since a larger
    value is the likelier to show a mistake), over and over until a round changes nothing.  Each configuration is
    asked about once.  The finding stays the one `cfg` showed: with one or two tokens or widths of 1, different
    mistakes look alike, so the pattern is named as the larger configuration shows it and the report shows the
    smallest.  `wide`: heads narrower than this are refused by design (Context.head_width): head widths stay
    multiples of it."""
    finding = outcome.details.get("finding")
    low = _Lows(min_heads, min_n, separate, wide or 2)
    answers: dict[Config, object] = {**(asked or {}), cfg: outcome}  # `asked`: what was already asked, and answered
    best = cfg

    def fails(candidate: Config | None) -> bool:
        nonlocal best
        if candidate is None or not low.allows(candidate) or _size(candidate.to_dict()) >= _size(best.to_dict()):
            return False
        if candidate not in answers:
            found = prop(candidate)
            answers[candidate] = None if found is None else _attach(found, candidate)
        if answers[candidate] is None or answers[candidate].status != outcome.status:  # a failure shrinks to a
            return False  # smaller failure, never to a configuration mha-check could not decide (float32: raised)
        best = candidate
        return True

    two = max(low.n, min(2, cfg.n))
    fails(_with(cfg, separate, low.width, heads=low.heads, width=low.width, per_head=1,
                context_length=max(low.ctx, two), n=two,
                batch=min(cfg.batch, 2), qkv_bias=False))
    changed = True
    while changed:
        changed = False
        for field in _FIELDS:
            current = _get(best, field, separate)
            bottom = low.of(field, best)
            if current is None or current <= bottom:
                continue
            if fails(_with(best, separate, low.width, **{field: bottom})):
                changed = True
                continue
            lo, hi = bottom + 1, current  # the smallest failing value is in (bottom, current]
            while lo < hi:
                mid = (lo + hi) // 2
                if fails(_with(best, separate, low.width, **{field: mid})):
                    hi, changed = mid, True
                else:
                    lo = mid + 1
    outcome = answers[best]
    if finding:
        outcome.details["finding"] = finding
    return outcome


_FIELDS = ("heads", "width", "per_head", "n", "context_length", "batch", "qkv_bias")


class _Lows:
    """Where `configs` draws, the bottom of each field: shrinking never leaves it (and never enlarges a field, so a
    batch of one stays one)."""

    def __init__(self, min_heads: int, min_n: int, separate: bool, width: int = 2):
        self.heads, self.n, self.separate = max(1, min_heads), max(1, min_n), separate
        self.ctx = max(2, self.n)
        self.width = width  # head widths are multiples of it: 2 (even), or the narrowest a class accepts

    def of(self, field: str, cfg: Config) -> int:
        return {"heads": self.heads, "width": self.width, "per_head": 1, "n": self.n, "batch": min(cfg.batch, 2),
                "context_length": max(self.ctx, cfg.n), "qkv_bias": 0}[field]

    def allows(self, cfg: Config) -> bool:
        return (cfg.heads >= self.heads and self.n <= cfg.n <= cfg.context_length and cfg.d_out % cfg.heads == 0
                and cfg.head_width % self.width == 0
                and (cfg.d_in % cfg.heads == 0 if self.separate else cfg.d_in == cfg.d_out))


def _get(cfg: Config, field: str, separate: bool) -> int | None:
    if field == "width":
        return cfg.head_width
    if field == "per_head":
        return cfg.d_in // cfg.heads if separate and cfg.d_in % cfg.heads == 0 else None
    return int(getattr(cfg, field))


def _with(cfg: Config, separate: bool, step: int = 2, **change) -> Config | None:
    """`cfg` with some fields changed: the head width and d_in's multiple of the heads are kept unless changed."""
    value = {f: _get(cfg, f, separate) for f in _FIELDS} | change
    heads, width = value["heads"], value["width"]
    if width % step:
        return None  # head widths stay even (or multiples of the narrowest a class accepts), as drawn
    d_in = heads * value["per_head"] if separate and value["per_head"] else (cfg.d_in if separate else heads * width)
    return Config(d_in=d_in, d_out=heads * width, heads=heads, context_length=value["context_length"],
                  batch=value["batch"], n=value["n"], dropout=cfg.dropout, qkv_bias=bool(value["qkv_bias"]),
                  kv_heads=_kv_kept(cfg, heads), dtype=cfg.dtype)


def _kv_kept(cfg: Config, heads: int) -> int | None:
    """A grouped configuration shrunk keeps its grouping: one key/value head (multi-query), or the same group size
    where it divides the heads; else as many key/value heads as heads."""
    if cfg.kv_heads is None or cfg.kv_heads == cfg.heads:
        return None
    if cfg.kv_heads == 1:
        return 1 if heads > 1 else None
    group = cfg.heads // cfg.kv_heads
    return heads // group if heads % group == 0 and heads > group else None


def _size(cfg: dict) -> tuple:
    return (cfg["batch"] * cfg["n"] * cfg["d_in"] + cfg["d_out"] * cfg["heads"], cfg["context_length"])
