"""How many bytes of arrays the replies to a frame of requests can legitimately hold.

The trusted side reads no more than it asked for: a child that pads its replies (code of the student's that patches
our worker) would otherwise make the grader hold hundreds of megabytes per frame and spend minutes reading them.
What each reply can carry follows from its request and the module's configuration: an output of (B, n, d_out), the
input's gradient, the lesson's eight roles (three (d_out, d_in) matrices, one (d_out, d_out), four biases), a
Jacobian of (B, n) x the input.  A wrong layer may return more than the lesson's shape (a hard-coded width, a
broadcasting mistake that adds an axis of n), so the bound is generous: `MARGIN` times that, plus `FLOOR` once for a
frame that carries any array.  Replies of header only (Loaded, Built, Done, MetaResult, DevicesResult, TraceResult,
Failed) carry no array at all: a frame of such requests may hold none.
"""
from __future__ import annotations

import math

from harness.wire import messages as m
from harness.wire.config import Config

FLOAT = 8  # bytes per element: every array a reply carries is float64
MARGIN = 64  # times what the lesson's layer returns: room for a wrong layer's larger output, never for padding
FLOOR = 8 << 20  # once per frame that carries arrays: a hard-coded width (768, 4096) at these sizes stays below it


def _roles(cfg: Config | None, x_width: int) -> int:
    """Elements of the lesson's roles (wq, wk, wv, wo and their biases) for this configuration."""
    d_in, d_out = (cfg.d_in, cfg.d_out) if cfg is not None else (x_width, x_width)
    return 3 * d_in * d_out + d_out * d_out + 4 * d_out


def _output(x, cfg: Config | None) -> int:
    """Elements of a forward pass's output, (B, n, d_out), for an input (B, n, d_in)."""
    shape = tuple(getattr(x, "shape", ()))
    lead = math.prod(shape[:-1]) if len(shape) > 1 else 1
    width = cfg.d_out if cfg is not None else (shape[-1] if shape else 1)
    return lead * max(width, shape[-1] if shape else 1)


def reply_elements(request: m.Request, cfg: Config | None) -> int:
    """The array elements the reply to `request` carries when it is what our worker sends; `cfg`: the configuration
    of the module the request is on (None when unknown: the input's width stands in for d_out)."""
    x = getattr(request, "x", None)
    width = x.shape[-1] if x is not None and x.ndim else 1
    if isinstance(request, m.Forward):
        return _output(x, cfg) + (x.size if request.want_x_after else 0)
    if isinstance(request, m.CacheRun):  # the chunks' outputs, joined: one forward's output
        return _output(x, cfg)
    if isinstance(request, m.Vjp):
        return _output(x, cfg) + x.size + _roles(cfg, width)
    if isinstance(request, m.Jacobian):
        lead = math.prod(x.shape[:2]) if x.ndim >= 2 else 1
        return lead * x.size
    if isinstance(request, m.ReadWeights):
        return _roles(cfg, width)
    return 0


def reply_budget(requests: list[m.Request], configs: dict[int, Config]) -> int:
    """The most array bytes the reply frame to `requests` may declare; `configs`: each instance's configuration by
    its handle.  Zero for a frame whose replies are headers only."""
    needed = sum(reply_elements(r, configs.get(getattr(r, "handle", None))) for r in requests)
    return FLOOR + MARGIN * FLOAT * needed if needed else 0
