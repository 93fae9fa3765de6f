import numpy as np

from checks import check, failed, passed
from harness.engine.search import find_failure
from harness.sandbox.subject import TargetFailure


@check(
    id="output-shape",
    claim="forward(x) returns a finite tensor of shape (B, n, d_out) for inputs of shape (B, n, d_in)",
    explanation="""Attention maps each of the n tokens of each of the B sequences to a vector of width d_out. A
    different shape, NaN or inf values, or an exception mean the layer cannot be used in a model.""",
    fix="""Return `self.out_proj(context)` where context has shape (B, n, d_out); NaN usually means a row of scores
    was entirely masked (a mask that also hides the diagonal).""",
    example="""x: (B, n, d_in) = (2, 3, 8), d_out = 8, H = 2 -> y must be (2, 3, 8) with every value finite
    with d_in = 6, d_out = 8: x (2, 3, 6) -> y (2, 3, 8)
    fail: y (2, 2, 3, 4) (heads never merged), or an exception, e.g. masked_fill with an unsliced (16, 16) mask
      on (2, 2, 3, 3) scores: 'The size of tensor a (16) must match the size of tensor b (3) ...'
    fail: y (2, 3, 8) with 16 NaN values at token 0: a mask that also hides the diagonal makes
      row 0 = softmax([-inf, -inf, -inf]) = [nan, nan, nan]""",
)
def run(ctx):
    def prop(cfg):
        try:
            y = ctx.build(cfg).forward(ctx.input(cfg))
        except TargetFailure as e:
            return failed(e.message if e.message.startswith("forward returned") else f"forward raised {e.message}")
        want = (cfg.batch, cfg.n, cfg.d_out)
        if y.shape != want:
            return failed(f"output has shape {y.shape}, expected {want}", observed=str(y.shape),
                          expected=str(want))
        if not np.all(np.isfinite(y)):
            bad = np.argwhere(~np.isfinite(y))
            positions = sorted({int(t) for t in bad[:, 1]})
            return failed(f"output has {len(bad)} NaN/inf values, at token positions {positions}",
                          observed="non-finite values", expected="finite values")
        return None

    return find_failure(ctx, prop) or passed("shape (B, n, d_out) and finite values for every configuration tried")
