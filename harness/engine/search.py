"""Configurations from hypothesis: the required ones first, then derandomized draws, shrunk on failure.

`find_failure(ctx, prop)` returns None when `prop(config)` (None for "fine", an Outcome for "broken") holds on the
required configurations and on `ctx.examples` drawn ones; otherwise the failing Outcome for the smallest
configuration hypothesis could shrink to, with that configuration attached.

Derandomized, hypothesis draws the same configurations every time as long as they all pass; they are remembered
per strategy, so that later targets in the same process (a batch) replay them without hypothesis's overhead, and
hypothesis only runs again, to search and shrink, when one of them fails.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile

from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis import strategies as st
from hypothesis.reporting import with_reporter

from harness.wire.config import Config

# hypothesis keeps caches in ./.hypothesis of the current folder, which is the student's: give it a private one
_HOME = tempfile.mkdtemp(prefix="mha-check-hypothesis-")
set_hypothesis_home_dir(_HOME)
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)


class _Found(Exception):
    def __init__(self, outcome):
        super().__init__(outcome.message)
        self.outcome = outcome


@st.composite
def configs(draw, separate: bool, qkv_bias: bool, min_heads: int = 1, min_n: int = 1):
    """Widths as real layers accept them: head widths even (rotary embeddings need that), d_in a multiple of the
    heads (some layers demand it; the lesson allows any d_in, and nothing in the lesson's layer depends on it)."""
    heads = draw(st.integers(min_heads, 4))
    head_width = draw(st.sampled_from((2, 4)))
    d_out = heads * head_width
    d_in = heads * draw(st.integers(1, 3)) if separate else d_out
    context_length = draw(st.integers(max(2, min_n), 10))
    n = draw(st.integers(min_n, context_length))
    batch = draw(st.integers(2, 3))
    bias = draw(st.booleans()) if qkv_bias else False
    return Config(d_in=d_in, d_out=d_out, heads=heads, context_length=context_length, batch=batch, n=n,
                  qkv_bias=bias)


def _attach(outcome, cfg: Config):
    if outcome.config is None:
        outcome.config = cfg.to_dict()
    return outcome


_DRAWN: dict[tuple, list[Config]] = {}  # strategy -> the configurations hypothesis drew when all passed


def find_failure(ctx, prop, min_heads: int = 1, min_n: int = 1, generated: bool = True, required=None):
    first = None
    for cfg in required if required is not None else ctx.required_configs():
        outcome = prop(cfg)
        if outcome is not None:
            first = _attach(outcome, cfg)
            break
    if not generated:
        return first
    key = (ctx.separate_widths, ctx.accepts("qkv_bias"), min_heads, min_n, ctx.examples)
    if first is None and key in _DRAWN:
        if all(prop(cfg) is None for cfg in _DRAWN[key]):
            return None  # the same draws as before, all fine: no need to ask hypothesis again
    strategy = configs(ctx.separate_widths, ctx.accepts("qkv_bias"), min_heads, min_n)
    drawn: list[Config] = []

    @settings(derandomize=True, database=None, deadline=None, max_examples=ctx.examples if first is None else 30,
              phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck),
              report_multiple_bugs=False, print_blob=False)
    @given(strategy)
    def search(cfg):
        assume(cfg.heads >= min_heads and cfg.n >= min_n)
        drawn.append(cfg)
        outcome = prop(cfg)
        if outcome is not None:
            raise _Found(_attach(outcome, cfg))

    try:
        with with_reporter(lambda *_: None):
            search()
    except _Found as found:
        if first is None or _size(found.outcome.config) <= _size(first.config):
            if first is not None and first.details.get("finding"):
                # show the smallest configuration, but name the pattern as the larger one shows it: with one or two
                # tokens or widths of 1, different mistakes look alike
                found.outcome.details["finding"] = first.details["finding"]
            return found.outcome
        return first
    if first is None:
        _DRAWN[key] = drawn
    return first


def _size(cfg: dict) -> tuple:
    return (cfg["batch"] * cfg["n"] * cfg["d_in"] + cfg["d_out"] * cfg["heads"], cfg["context_length"])
