"""causal-leakage: through the gradient of every output position with respect to every input position.

For each batch element b and output position t, the child computes d(r·y[b, t]) / d x[b, s] for all s; the
verdict needs every s > t to be exactly zero (float64: a fill value of -10 or -100 instead of -inf leaves a
small but non-zero gradient) and every s <= t to be non-zero (so that a detached or constant output cannot pass).
Where the weights can be transplanted, the output projection is restricted to one head at a time so that every
head is checked on its own.  A perturbation of the future tokens must leave earlier outputs bit-identical, which
also catches leaks that bypass autograd.
"""
import numpy as np

from checks import check, failed, passed
from harness.engine.search import find_failure
from harness.sandbox.subject import TargetFailure, influence_from_jacobian

INFLUENCE = 1e-12  # relative gradient size below which a past position counts as having no influence


def describe_leak(G: np.ndarray) -> tuple[str, str]:
    """Name the pattern: (what is wrong, which mistake it looks like)."""
    B, n, _ = G.shape
    future = np.triu(np.ones((n, n), bool), 1)
    past = ~future
    scale = np.nanmax(G) if np.isfinite(G).any() else 1.0
    if not np.all(np.isfinite(G)):
        b, t, s = np.argwhere(~np.isfinite(G))[0]
        return (f"the gradient is NaN/inf (batch {b}, output {t}, input {s})",
                "a row with every score masked gives NaN: the mask also hides the diagonal (use triu(..., 1))")
    leaks = np.argwhere((G > 0) & future)
    dead = np.argwhere((G <= INFLUENCE * max(scale, 1e-300)) & past)
    if len(leaks):
        b, t, s = leaks[0]
        what = f"output position {t} depends on future input position {s} (batch {b}, gradient {G[b, t, s]:.3g})"
        rel = G[:, future].max() / max(G[:, past].max(), 1e-300)
        if len(dead) and np.all(G[:, future] > 0) and len(dead) >= B * n * (n - 1) // 2:
            return what, "the mask is inverted: it hides the past and shows the future (masked_fill(~mask, ...))"
        if rel < 1e-2:
            return what, ("a small leak: masking with a finite value such as -10 or -100 instead of "
                          "float('-inf') lets future tokens through with a tiny weight")
        next_only = np.triu(np.ones((n, n), bool), 1) & ~np.triu(np.ones((n, n), bool), 2)
        if n >= 3 and np.all(G[:, next_only] > 0) and not np.any(G[:, future & ~next_only] > 0):
            return what, "the mask lets exactly one future token through: use torch.triu(..., diagonal=1)"
        if n >= 3 and np.all(G[:, future] > 0) and not len(dead):
            return what, "no causal mask is applied (or it is applied after the softmax, or its result is discarded)"
        return what, ("the future leaks into the past: check the mask (triu(..., diagonal=1), sliced [:n, :n], "
                      "applied before a softmax over the last axis) and the reshapes (a wrong view mixes tokens)")
    b, t, s = dead[0]
    what = f"output position {t} does not depend on input position {s} <= {t} (batch {b})"
    if np.all(G == 0):
        return what, "the output does not depend on the input at all through autograd (detached, or no_grad?)"
    if all(t2 == s2 for _, t2, s2 in dead):
        return what, "the mask also hides the diagonal: a token must see itself (use triu(..., diagonal=1))"
    return what, "some allowed positions have no influence: is the mask or the softmax axis wrong?"


@check(
    id="causal-leakage",
    claim="each output position depends on every input position up to it and on none after it",
    explanation="""A causal layer predicts token t+1 from tokens 0..t only. If the output at t depends on a later
    input, training cheats by looking ahead and generation breaks. Measured by the gradient of each output position
    with respect to each input position, per sequence and per head.""",
    fix="""Mask the scores before the softmax with `scores.masked_fill(mask[:n, :n], float("-inf"))`, where
    `mask = torch.triu(torch.ones(L, L), diagonal=1).bool()`, over the last axis.""",
    example="""x: (2, 3, 8); Jacobian of r·y[b, t] with respect to x: (B, n, B, n, d_in) = (2, 3, 2, 3, 8)
    G[b, t, s] = norm over the 8 features of d (r·y[b, t]) / d x[b, s]: one 3 × 3 map per sequence, which
      must be [[+, 0, 0], [+, +, 0], [+, +, +]] (+ = non-zero): for t = 0, s = 1, 2 exactly 0, s = 0 not
    fill -10 instead of -inf leaves exp(-10) ≈ 4.5e-5 of weight on each future token: G[b, 0, 2] of order 1e-5
    fill -100: y equals the reference to every digit, yet G[b, 0, 2] is of order 1e-44, still > 0 in float64
    repeated per head (W_o keeps only that head's 4 columns); then x[:, 1:] is perturbed and y[:, 0] must stay
      bit-identical (likewise x[:, 2:] and y[:, :2])""",
)
def run(ctx):
    def leak(inst, x, r, cfg, head=None):
        head_info, arrays = inst.jacobian(x, r)
        if "jac" not in arrays:
            if head_info.get("no_graph"):
                return failed("the output is not connected to the input in the autograd graph (detached, computed "
                              "under torch.no_grad, or rebuilt from numbers): no position influences any other",
                              diagnosis="no gradient")
            return failed(f"output has shape {tuple(head_info.get('shape', ()))}: cannot measure leakage")
        G = influence_from_jacobian(arrays["jac"])
        future = np.triu(np.ones((cfg.n, cfg.n), bool), 1)
        scale = np.nanmax(G) if np.isfinite(G).any() else 0
        bad = (~np.isfinite(G)).any() or (G[:, future] > 0).any() or (G[:, ~future] <= INFLUENCE * scale).any()
        if bad or scale == 0:
            what, looks_like = describe_leak(G)
            where = f" in head {head}" if head is not None else ""
            return failed(f"{what}{where}; {looks_like}", observed=what, expected="zero for s > t, non-zero for s <= t",
                          leakage_map=(G[0] > INFLUENCE * max(scale, 1e-300)).astype(int).tolist(),
                          diagnosis=looks_like)
        return None

    def prop(cfg):
        inst = ctx.build(cfg)
        x = ctx.input(cfg)
        r = ctx.rng("r", cfg).standard_normal(cfg.d_out)
        try:
            outcome = leak(inst, x, r, cfg)
        except TargetFailure as e:
            return failed(f"forward or backward raised {e.message}")
        if outcome:
            return outcome
        outcome = _perturbation(inst, x, cfg, ctx)
        if outcome or cfg not in ctx.required_configs() or inst.layout is None or cfg.heads == 1:
            return outcome
        w = ctx.weights_for(inst, "leak")
        for h in range(cfg.heads):
            only_h = w.wo.copy()
            dh = cfg.head_width
            only_h[:, : h * dh] = 0
            only_h[:, (h + 1) * dh:] = 0
            ctx.transplant(inst, _with_wo(w, only_h))
            outcome = leak(inst, x, r, cfg, head=h)
            if outcome:
                return outcome
        return None

    return find_failure(ctx, prop) or passed(
        "every output depends on all earlier and no later positions (gradients, every batch element and head)")


def _with_wo(w, wo):
    from dataclasses import replace

    return replace(w, wo=wo)


def _perturbation(inst, x, cfg, ctx):
    """Change tokens after a split point; outputs up to it must not move at all."""
    inputs = [x]
    for split in range(cfg.n - 1):
        x2 = x.copy()
        x2[:, split + 1:] += ctx.rng("perturb", cfg, split).standard_normal(x2[:, split + 1:].shape)
        inputs.append(x2)
    y, *perturbed = inst.forward_many(inputs)
    for split, y2 in enumerate(perturbed):
        moved = np.abs(y2[:, : split + 1] - y[:, : split + 1]).max()
        if not np.isfinite(moved) or moved > 0:
            return failed(f"changing the tokens after position {split} changed the outputs at positions 0..{split} "
                          f"(by up to {moved:.3g}): the future leaks into the past",
                          observed=f"change {moved:.3g}", expected="no change",
                          diagnosis="future tokens influence past outputs")
    return None
