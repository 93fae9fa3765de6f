"""A mistake's free value read off the module's own output (issue 28: a diagnosis tested on code it was not built
from).

Some mistakes are a family, not one number: the masked scores replaced by a finite constant (-10 in the catalogue,
-1e-12 in hyunwoongko's transformer, 0 where the scores are multiplied by the mask), or a constant added to them (a
0/1 mask added: +1 on the future, or on the past).  Their mutants declare which knob of their variant is free
(`MutantInfo.fitted`).  Here its value is fitted to the module's output under the same weights and input, and the
caller then asks what it asks of every variant: is the variant, with that value, the module's output, every value
within tolerance (`compare.same`)?  The fit only proposes the value; the evidence is that comparison, never a
small residual.

The fit is a scalar search: the variant on a coarse grid of values (a future score from -40 to +40: below that its
weight is 0 in float64, above it the future outweighs everything), then Gauss-Newton steps from the best point.
Values that do not depend on the knob (rows with nothing masked) must already be the module's, else nothing is
fitted: two evaluations reject a reading of the parameters or a call that is not this mistake's.  A value under
which the mask changes nothing (0 added to the scores) is not this mistake but no mask at all, and is not used.
"""
from __future__ import annotations

import numpy as np

from harness.engine.compare import same
from reference import variants

GRID = (-40.0, 40.0, -32.0, -26.0, -21.0, -17.0, -14.0, -11.0, -9.0, -7.0, -5.0, -3.5, -2.0, -1.0, 0.0, 1.0, 2.0,
        3.5, 5.0, 7.0, 10.0, 15.0, 25.0)  # the two ends first: what they agree on does not depend on the knob
STEPS = 25  # Gauss-Newton steps at most (each two evaluations); a few suffice from the grid's best point


def output(x, heads: int, w, knobs: dict, free: tuple[str, ...], y) -> np.ndarray:
    """The variant's output: with its declared knobs, or, when a knob is free and those are not the module's
    output, with that knob's value fitted to `y` (the closest the variant comes to it)."""
    theirs = variants.forward(x, heads, w, **knobs)
    if not free or theirs.shape != y.shape or same(y, theirs):
        return theirs
    value = fit(x, heads, w, knobs, free[0], y)
    if value is None:
        return theirs
    fitted = variants.forward(x, heads, w, **{**knobs, free[0]: value})
    if same(fitted, variants.forward(x, heads, w, **{**knobs, "mask": "none"})):
        return theirs  # a value that hides nothing (0 added to the future) is no mask at all: no-mask's numbers
    return fitted


def fit(x, heads: int, w, knobs: dict, knob: str, y) -> float | None:
    """The value of `knob` under which the variant comes closest to `y` (least squares), or None when the values
    that do not depend on it already differ from `y`, or `y` is not finite."""
    y = np.asarray(y, dtype=np.float64)
    if not np.isfinite(y).all():
        return None
    scale = max(1.0, float(np.abs(y).max(initial=0.0)))
    f = lambda v: variants.forward(x, heads, w, **{**knobs, knob: float(v)})
    low, high = f(GRID[0]), f(GRID[1])
    fixed = np.isclose(low, high, rtol=1e-12, atol=1e-12 * scale)  # values the knob does not move
    if not same(y[fixed], low[fixed]):
        return None
    cost = lambda out: float(np.sum(((out - y) / scale) ** 2)) if np.isfinite(out).all() else np.inf
    outs = {GRID[0]: low, GRID[1]: high, **{v: f(v) for v in GRID[2:]}}
    best, v = min((cost(out), v) for v, out in outs.items())
    if not np.isfinite(best):
        return None
    at = outs[v]
    for _ in range(STEPS):
        h = 1e-3  # a forward difference: each step still gains about three orders of magnitude
        slope = ((f(v + h) - at) / h).ravel()
        if not np.isfinite(slope).all() or not slope.any():
            break
        step = max(-5.0, min(5.0, -float(slope @ (at - y).ravel()) / float(slope @ slope)))
        while abs(step) > 1e-12 * (1.0 + abs(v)):
            nxt = f(v + step)
            if cost(nxt) <= best:
                break
            step /= 2
        else:
            break
        stalled = cost(nxt) > 0.99 * best  # near the module's value each step gains orders of magnitude
        v, at, best = v + step, nxt, cost(nxt)
        if stalled or abs(step) < 1e-10 * (1.0 + abs(v)):
            break
    return v
