"""A mistake's free value read off the module's own output (issue 28: a diagnosis tested on code it was not built
from).

Some mistakes are a family, not one number: the masked scores replaced by a finite constant (-10 in the catalogue,
-1e-12 in hyunwoongko's transformer, 0 where the scores are multiplied by the mask), a constant added to them (a
0/1 mask added: +1 on the future, or on the past), or the scores divided by a number no named scale has (`/ 8.0`, a
paper's head width hard-coded; a student's `/ 3.0`).  Their mutants declare which knob of their variant is free
(`MutantInfo.fitted`).  Here its value is fitted to the module's output under the same weights and input, and the
caller then asks what it asks of every variant: is the variant, with that value, the module's output, every value
within tolerance (`compare.same`)?  The fit only proposes the value; the evidence is that comparison, never a
small residual.

The fit is a scalar search: the variant on a grid of values (dense from -40 to +40, where the scores of
init-scale weights compete with the fill; sparse out to ±1e4 for layers whose scores are large), then Gauss-Newton
steps from its best points; where scores are large the cost is steep only near the module's value and flat between
grid values, so if no start reaches the output, the grid is refined around its best point and the steps start
again.  A fill above every score gives the same outputs as any larger one: such a value is read as "this or more"
(`told`).  Values that do not depend on the knob (rows with nothing masked: the same under fills of -1e6 and +1e6)
must already be the module's, else nothing is fitted: two evaluations reject a reading of the parameters or a call
that is not this mistake's.  A value under
which the mask changes nothing (0 added to the scores) is not this mistake but no mask at all, and is not used.
"""
from __future__ import annotations

import numpy as np

import mutants
from harness.engine.compare import same
from harness.engine.trace.detect_mask import fill_mark
from harness.wire.errors import CannotDrive, HarnessFailure, TargetFailure, WorkerDied
from reference import variants
from reference.rotary import with_rope

ENDS = (-1e6, 1e6)  # beyond every score: what these two agree on does not depend on the knob
GRID = (-40.0, 40.0, -32.0, -26.0, -21.0, -17.0, -14.0, -11.0, -9.0, -7.0, -5.0, -3.5, -2.0, -1.0, 0.0, 1.0, 2.0,
        3.5, 5.0, 7.0, 10.0, 15.0, 20.0, 25.0, 32.0, -60.0, 60.0, -100.0, 100.0, -200.0, 200.0, -500.0, 500.0, -1e3,
        1e3, -1e4, 1e4)  # dense where scores of init-scale weights compete; wider for layers whose scores are large
STEPS = 25  # Gauss-Newton steps at most (each two evaluations); a few suffice from the grid's best point
STARTS = 3  # the grid's best points the steps start from, in turn, until one reaches the module's output
ZOOMS = 8  # then, if none did, refinements of the grid around its best point (each 7 evaluations)
SCALE_GRID = tuple(float(np.log(v)) for v in (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0,
                                              32.0, 64.0, 128.0, 512.0))  # a divisor is fitted by its logarithm: it
# is positive, and a step means as much at 2 as at 200
SCALE_ENDS = (-25.0, 25.0)  # log divisors: a hard maximum and an even spread; rows with one key allowed are the same


def output(x, heads: int, w, knobs: dict, free: tuple[str, ...], y) -> np.ndarray:
    """The variant's output: with its declared knobs, or, when a knob is free and those are not the module's
    output, with that knob's value fitted to `y` (the closest the variant comes to it)."""
    theirs = variants.forward(x, heads, w, **knobs)
    if not free or theirs.shape != y.shape or same(y, theirs):
        return theirs
    if free[0] == "scale":
        return _scaled(x, heads, w, knobs, y, theirs)
    value = fit(x, heads, w, knobs, free[0], y)
    if value is None:
        return theirs
    fitted = variants.forward(x, heads, w, **{**knobs, free[0]: value})
    if same(fitted, variants.forward(x, heads, w, **{**knobs, "mask": "none"})):
        return theirs  # a value that hides nothing (0 added to the future) is no mask at all: no-mask's numbers
    return fitted


def _scaled(x, heads: int, w, knobs: dict, y, theirs: np.ndarray) -> np.ndarray:
    """The variant with its divisor fitted to `y`, `theirs` (the catalogued divisor's output) where none is; the
    lesson's own output where `y` is it (this configuration cannot show the mistake: `/ 3.0` on heads 9 wide).  A
    divisor that another catalogued mistake has (sqrt(d)) is fitted too: which of the two it is, the recorded
    forward says (`MutantInfo.named_by_trace`)."""
    at = variants.by_scale(x, heads, w, **knobs)
    lesson = at(variants.divisor(x, heads, w, "sqrt-dh"))
    if same(y, lesson):
        return lesson
    value = fit(x, heads, w, knobs, "scale", y)
    return theirs if value is None else at(value)


def fit(x, heads: int, w, knobs: dict, knob: str, y) -> float | None:
    """The value of `knob` under which the variant comes closest to `y` (least squares), or None when the values
    that do not depend on it already differ from `y`, or `y` is not finite."""
    y = np.asarray(y, dtype=np.float64)
    if not np.isfinite(y).all():
        return None
    scale = max(1.0, float(np.abs(y).max(initial=0.0)))
    ends, grid, value_of = ENDS, GRID, float
    if knob == "fill":  # the same numbers, the scores computed once for every value tried (issue 27)
        at = variants.by_fill(x, heads, w, **{k: v for k, v in knobs.items() if k != "fill"})
        f = lambda v: at(float(v))
    elif knob == "scale":  # the divisor by its logarithm, the scores computed once unscaled
        at = variants.by_scale(x, heads, w, **knobs)
        ends, grid, value_of = SCALE_ENDS, SCALE_GRID, lambda u: float(np.exp(np.clip(u, -60.0, 60.0)))
        f = lambda u: at(value_of(u))
    else:
        f = lambda v: variants.forward(x, heads, w, **{**knobs, knob: float(v)})
    v = _fit(f, ends, grid, y, scale)
    return None if v is None else value_of(v)


def _fit(f, ends: tuple[float, float], grid: tuple[float, ...], y: np.ndarray, scale: float) -> float | None:
    """`fit` on the values `f` takes (a fill, a log divisor): None where what `ends` agree on is not `y`."""
    low, high = f(ends[0]), f(ends[1])
    fixed = np.isclose(low, high, rtol=1e-12, atol=1e-12 * scale)  # values the knob does not move
    if not same(y[fixed], low[fixed]):
        return None
    cost = lambda out: float(np.sum(((out - y) / scale) ** 2)) if np.isfinite(out).all() else np.inf
    outs = {ends[0]: low, ends[1]: high, **{v: f(v) for v in grid}}
    starts = sorted((cost(out), v) for v, out in outs.items())[:STARTS]
    if not np.isfinite(starts[0][0]):
        return None
    found = []
    for best, v in starts:  # from the best grid points: large scores make the cost rise and fall between them
        if not np.isfinite(best):
            break
        v, best = _descend(f, cost, y, v, outs[v], best)
        found.append((best, v))
        if same(f(v), y):
            return v
    v = _zoom(f, cost, outs)  # where scores are large the cost is steep only near the value, flat between grid points
    best, v = min(found + [_descend(f, cost, y, v, outs[v], cost(outs[v]))[::-1]])
    return v


def _zoom(f, cost, outs: dict) -> float:
    """The grid refined around its best point, ZOOMS times (each time 7 values between its two neighbours): the
    best value found (`outs` gains the outputs computed)."""
    costs = {v: cost(out) for v, out in outs.items()}
    for _ in range(ZOOMS):
        values = sorted(costs)
        i = values.index(min(values, key=costs.get))
        lo, hi = values[max(i - 1, 0)], values[min(i + 1, len(values) - 1)]
        if hi - lo < 1e-3 * (1.0 + abs(values[i])):
            break
        for v in np.linspace(lo, hi, 9)[1:-1]:
            if float(v) not in outs:
                outs[float(v)] = f(v)
                costs[float(v)] = cost(outs[float(v)])
    return min(costs, key=costs.get)


def _descend(f, cost, y, v: float, at: np.ndarray, best: float) -> tuple[float, float]:
    """Gauss-Newton steps from `v` (whose output is `at`, its cost `best`): (the value reached, its cost)."""
    for _ in range(STEPS):
        h = 1e-3 * max(1.0, abs(v) / 100)  # a forward difference: each step still gains about three orders of
        # magnitude (relative to the value far from 0, where the output changes as slowly)
        slope = ((f(v + h) - at) / h).ravel()
        if not np.isfinite(slope).all() or not slope.any():
            break
        reach = max(5.0, abs(v) / 4)  # a step of at most 5 near 0, a quarter of the value far from it
        step = max(-reach, min(reach, -float(slope @ (at - y).ravel()) / float(slope @ slope)))
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
    return v, best


def told(ctx, mid: str, marks: list[dict]) -> list[dict]:
    """The mark a fill mistake named from the numbers alone tells itself with, its title and symptom saying the fill
    read off the output (on the base configuration, under the diagnosis's weights and input), as a line of the trace
    would (`fill_mark`); [] when a mark of the trace names it already (the line tells its own value), when the
    mistake is no fill, or the fit does not reproduce the output.  A fill whose output any larger fill gives too (the
    future outweighs every score) is told as the least such value, "or more"."""
    knobs = mutants.variants().get(mid, {})
    if "fill" not in mutants.fitted().get(mid, ()) or knobs.get("mask_op", "fill") != "fill" or \
            any(m.get("mutant") == mid for m in marks):
        return []
    try:
        cfg = ctx.base
        inst = ctx.build(cfg)
        w = ctx.lesson_weights_for(inst, "diagnosis")  # as diagnosis's samples
        ctx.transplant(inst, w)
        x = ctx.input(cfg, "diagnosis")
        y = inst.forward(x)
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return []
    knobs = with_rope(knobs, ctx.rope)
    f = lambda v: variants.forward(x, cfg.heads, w, **{**knobs, "fill": float(v)})
    value = fit(x, cfg.heads, w, knobs, "fill", y)
    if value is None or not same(f(value), y):
        return []
    at_least = value > 0 and same(f(ENDS[1]), y)
    mark = fill_mark(_least(f, y, value) if at_least else value, at_least)
    if "title" not in mark:
        return []  # a catalogued fill (-10, -100): the catalogue's own words
    return [{"id": "fitted", "mutant": mid, "text": mark["text"], "at": None, "code": None,
             "title": mark["title"], "symptom": mark["symptom"]}]


def _least(f, y, value: float) -> float:
    """The least fill whose output is still `y`, below `value` (which gives it): found by halving the bracket."""
    low = value
    for _ in range(40):  # a value below that gives another output
        low -= max(1.0, abs(low))
        if not same(f(low), y):
            break
    else:
        return value
    high = value
    for _ in range(40):
        mid = (low + high) / 2
        if same(f(mid), y):
            high = mid
        else:
            low = mid
        if high - low < 1e-3 * max(1.0, abs(high)):
            break
    return high
