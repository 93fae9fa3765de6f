"""view-order: compare the module, under transplanted weights, with the reference and with the two view-order
mistakes of the lesson computed by the reference itself.  Two weight sets are tried: random ones, and ones with
W_q = W_k = 0 (uniform causal attention), where scaling and softmax mistakes vanish but view-order ones do not."""
from dataclasses import replace

import numpy as np

from checks import check, failed, passed
from checks.output_shape import output_shape
from harness.engine.compare import close
from harness.engine.search import find_failure
from reference import numpy_ref

MISTAKES = {
    ("view-bhnd", "lesson"): "heads are split with view(B, H, n, dh) straight from (B, n, d): that mixes tokens "
                             "and features; split with view(B, n, H, dh) and then transpose(1, 2)",
    ("lesson", "no-transpose"): "heads are merged without moving the head axis back: (B, H, n, dh) viewed as "
                                "(B, n, d) mixes tokens; merge with transpose(1, 2).contiguous().view(B, n, d)",
    ("view-bhnd", "no-transpose"): "heads are split with view(B, H, n, dh) and merged without the transpose back",
}
DONE_WITH = {("view-bhnd", "lesson"): "split with view(B, H, n, dh)",
             ("lesson", "no-transpose"): "merged without transpose(1, 2)",
             ("view-bhnd", "no-transpose"): "split with view(B, H, n, dh) and merged without transpose(1, 2)"}


def _zero_qk(w):
    return replace(w, wq=np.zeros_like(w.wq), wk=np.zeros_like(w.wk), bq=None, bk=None)


@check(
    id="view-order",
    claim="heads are split with view(B, n, H, dh).transpose(1, 2) and merged back with the transpose first",
    explanation="""Splitting (B, n, d) with view(B, H, n, dh) gives the same shape as the right way but cuts the
    memory in the wrong order: each "head" gets pieces of several tokens. The shapes agree, the results are wrong,
    and only a comparison with a reference catches it. The same holds for merging without the transpose back.""",
    fix="""Split: `t.view(B, n, H, dh).transpose(1, 2)`; merge: `ctx.transpose(1, 2).contiguous().view(B, n, d)`.""",
    needs=(output_shape,),
    weights=True,
    example="""x: (2, 3, 8), H = 2, dh = 4; with the same weights the reference is computed the right way and wrongly:
      split with q.view(2, 2, 3, 4) (no transpose) and/or merge with view(2, 3, 8) without transpose(1, 2)
    the wrong split gives head 0 'positions' = token 0 f0-3, token 0 f4-7, token 1 f0-3
    fail: your y differs from the reference and equals one of the wrong versions (within 1e-5)
    second weight set W_q = W_k = 0: all scores 0, weights [[1, 0, 0], [1/2, 1/2, 0], [1/3, 1/3, 1/3]] for any
      scale, so a scaling mistake vanishes there while a view-order mistake still moves y (by ~1)""",
)
def view_order(ctx):
    def prop(cfg):
        inst = ctx.build(cfg)
        x = ctx.input(cfg)
        base = ctx.weights_for(inst, "view")
        for w in (base, _zero_qk(base)):
            ctx.transplant(inst, w)
            y = inst.forward(x)
            if close(y, numpy_ref.forward(x, cfg.heads, w)):
                continue
            for (split, merge), mistake in MISTAKES.items():
                if close(y, numpy_ref.forward(x, cfg.heads, w, split=split, merge=merge)):
                    return failed(mistake, observed=("your output equals the lesson's layer with its heads "
                                            f"{DONE_WITH[split, merge]}"),
                                  expected="output equals the reference", finding=f"view:{split}/{merge}")
        return None

    outcome = find_failure(ctx, prop, min_heads=2, min_n=2)
    return outcome or passed("no view-order mistake: outputs never match a wrong split or merge")
