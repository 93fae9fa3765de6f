"""Influence of input positions on output positions, measured through the child's Jacobian.

`influence(inst, x, r)` gives G[b, t, s] = |d (r · y[b, t]) / d x[b, s]|: a causal layer has G = 0 exactly for
s > t and G > 0 for s <= t.  The causal-leakage check judges these maps; `maps(ctx)` measures them for the picture
(harness.render.plot draws them): one for the module and, where the weights are mapped with certainty, one per head
(the output projection restricted to that head).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from harness.engine.records import Leakage, Panel
from harness.wire.config import Config
from harness.wire.errors import CannotDrive, HarnessFailure, TargetFailure, WorkerDied

PLOT_CONFIG = Config(d_in=8, d_out=8, heads=2, context_length=12, batch=2, n=8)
INFLUENCE = 1e-12  # relative gradient size below which an allowed position counts as having no influence
CAUSAL, LEAKS, WRONG_SHAPE, UNCLEAR = "causal", "leaks", "wrong shape", "unclear"  # what one call showed (judge)
MASKS_SOME = "leaks, masking some positions"  # a leak where some positions are masked: a mask of its own
WINDOW = "causal, hiding the far past"  # no later position counts, and every earlier one beyond a window of k >= 1


def influence_from_jacobian(jac: np.ndarray) -> np.ndarray:
    """(B, n, B, n, d_in) Jacobian -> (B, t, s) gradient norms within each sequence."""
    return np.stack([np.linalg.norm(jac[b, :, b], axis=-1) for b in range(jac.shape[0])])


def influence(inst, x: np.ndarray, r: np.ndarray, mode: str = "eval") -> np.ndarray | None:
    """(B, n, n) influence map, or None when the output has no autograd graph or not the expected shape."""
    result = inst.jacobian(x, r, mode)
    return influence_from_jacobian(result.jac) if result.jac is not None else None


def only_head(w, h: int, dh: int):
    """The weights with the output projection restricted to head h's columns: the output then shows that head."""
    wo = w.wo.copy()
    wo[:, : h * dh] = 0
    wo[:, (h + 1) * dh:] = 0
    return replace(w, wo=wo)


def panel(label: str, G: np.ndarray | None, note: str = "") -> Panel:
    """One map with its counts: cells of the future that leak, allowed cells with no influence."""
    if G is None:
        return Panel(label, None, None, None, note or "no gradient: the output is not connected to the input")
    G = np.asarray(G, dtype=float)
    if G.ndim == 3:
        G = G.max(axis=0)  # the worst sequence of the batch
    n = G.shape[0]
    future = np.triu(np.ones((n, n), bool), 1)
    finite = np.isfinite(G)
    scale = float(G[finite].max()) if finite.any() else 0.0
    leaks = int(((G > 0) | ~finite)[future].sum())
    dead = int(((G <= INFLUENCE * scale) & finite)[~future].sum()) if scale > 0 else int((~future).sum())
    if leaks:
        verdict = f"LEAKS: {leaks} future cell{'s' if leaks != 1 else ''}"
    elif dead:
        verdict = f"{dead} allowed cell{'s' if dead != 1 else ''} without influence"
    else:
        verdict = "causal: no leak"
    return Panel(label, G.tolist(), leaks, dead, verdict + (f" ({note})" if note else ""))


def maps(ctx, heads: bool = True, cfg: Config | None = None) -> Leakage:
    """The influence maps for the module and, where weights are mapped with certainty, each head."""
    cfg = ctx.shaped(cfg or PLOT_CONFIG)  # the form's heads: a single-head layer has one map, no per-head ones
    inst = ctx.build(cfg)
    x = ctx.input(cfg, "plot")
    r = ctx.rng("plot-r", cfg).standard_normal(cfg.d_out)
    panels = [panel("module", influence(inst, x, r))]
    notes = []
    if heads and cfg.heads > 1:
        if inst.layout is None:
            notes.append("per-head maps need the weights mapped with certainty (Q, K, V, output projection)")
        else:
            w = ctx.weights_for(inst, "plot")
            for h in range(cfg.heads):
                ctx.transplant(inst, only_head(w, h, cfg.head_width))
                panels.append(panel(f"head {h}", influence(inst, x, r)))
    return Leakage(cfg.to_dict(), tuple(panels), tuple(notes))


def maps_or_error(ctx, heads: bool = True) -> Leakage:
    """`maps`, or a Leakage that says why there are none (`error`) when the student's module cannot be built or run
    for them."""
    try:
        return maps(ctx, heads)
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied) as e:
        return Leakage(error=f"no leakage map: {e.message}")


def judge(result, cfg) -> str:
    """One way of calling forward, judged by its eval-mode Jacobian (a `JacobianResult`): CAUSAL (every earlier
    position counts, no later one), LEAKS (a later position counts, a NaN, or no autograd graph at all: not causal
    under any reading), MASKS_SOME (a later position counts while another, later or earlier, is hidden in every
    sequence: a mask is applied, and leaks; `triu` where `tril` was meant hides the past), WRONG_SHAPE, or UNCLEAR
    (no future leak, but earlier positions without influence: a layout of its own, such as sequence-first, may read
    our axes otherwise, so this is no evidence), or WINDOW: no future leak, and in every sequence each position
    counts with the k >= 1 before it and no earlier one (a sliding window, audiocraft's past_context): a band that
    a swapped layout does not draw (read batch-first, a sequence-first layer keeps the diagonal alone)."""
    if result.jac is None:
        return LEAKS if result.no_graph else WRONG_SHAPE
    G = influence_from_jacobian(result.jac)
    if not np.isfinite(G).all():
        return LEAKS
    future = np.triu(np.ones((cfg.n, cfg.n), bool), 1)
    past = np.tril(np.ones((cfg.n, cfg.n), bool), -1)
    if (G[:, future] > 0).any():  # a position always hidden, later or earlier: a mask of its own, which leaks
        hides = (G[:, future] == 0).all(axis=0).any() or (G[:, past] == 0).all(axis=0).any()
        return MASKS_SOME if hides else LEAKS
    scale = G.max()
    if scale <= 0:
        return UNCLEAR
    live = G > INFLUENCE * scale
    if live[:, ~future].all():
        return CAUSAL
    back = np.subtract.outer(np.arange(cfg.n), np.arange(cfg.n))  # t - s
    k = back[live.any(axis=0)].max()  # the furthest earlier position that counts anywhere
    band = (back >= 0) & (back <= k)
    return WINDOW if k >= 1 and (live == band).all() else UNCLEAR
