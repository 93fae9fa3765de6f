"""eval-determinism: in eval() mode, with dropout > 0, the output is deterministic and dropout is off."""
import numpy as np

from checks import check, failed, passed
from checks.output_shape import output_shape
from harness.engine.compare import same, worst_difference
from harness.wire.config import Config


@check(
    id="eval-determinism",
    claim="in eval() mode, with dropout > 0, the output is deterministic and dropout is off",
    explanation="""Dropout on the attention weights is for training only: nn.Dropout turns itself off in eval()
    mode, but F.dropout(w, p) with the default training=True, or training=True hard-coded, keeps dropping at
    evaluation, and generation becomes random.""",
    fix="""Use `self.dropout = nn.Dropout(p)` and `w = self.dropout(w)`, or `F.dropout(w, p, training=self.training)`,
    or `dropout_p=self.p if self.training else 0.0` for scaled_dot_product_attention.""",
    example="""CausalMHA(6, 2, 7, dropout=0.5).eval() (or every nn.Dropout set to p = 0.5), x: (2, 4, 6)
    two forward passes must be bit-identical, and equal to the same weights built with dropout = 0
    F.dropout(w, 0.5, training=True) in eval(): each weight of w (2, 2, 4, 4) is zeroed with probability 0.5
      and the others doubled: row 0 [1, 0, 0, 0] becomes [2, 0, 0, 0] or [0, 0, 0, 0], so two passes differ
    right: nn.Dropout(0.5) is the identity after .eval()""",
    needs=(output_shape,),
)
def eval_determinism(ctx):
    base = ctx.base
    cfg = Config(**{**base.to_dict(), "dropout": 0.5})
    by_arg = ctx.accepts("dropout")
    inst = ctx.build(cfg if by_arg else base, force_dropout=None if by_arg else 0.5)
    how = "dropout=0.5" if by_arg else "every nn.Dropout set to p=0.5"
    if not by_arg and not inst.info.dropout_modules:
        how = "no dropout argument nor nn.Dropout module found; determinism only"
    x = ctx.input(cfg)
    first, second = inst.forward_many([x, x])
    if not np.array_equal(first, second, equal_nan=True):
        return failed(f"with {how}, two forward passes in eval() mode gave different outputs: "
                      + worst_difference(second, first, ("second pass", "first pass"))
                      + "; dropout is still active in eval mode",
                      config=cfg, observed="different outputs", expected="identical outputs",
                      finding="dropout in eval")
    if inst.layout is not None:  # same weights with and without dropout: eval() must make them agree
        plain = ctx.build(base)
        w = ctx.weights_for(plain, "eval")
        ctx.transplant(inst, w)
        ctx.transplant(plain, w)
        with_dropout, without = (replies[0].y for replies in ctx.subject.frame_or_raise(
            [(inst, [inst.forward_request(x)]), (plain, [plain.forward_request(x)])]))
        if not same(with_dropout, without):
            return failed(f"with {how}, the eval() output differs from the same module built with dropout=0: "
                          + worst_difference(with_dropout, without, ("p=0.5", "p=0"))
                          + "; dropout (or its 1/(1-p) scaling) is applied "
                          "in eval mode", config=cfg, observed="output depends on p in eval()",
                          expected="the same output as with p=0", finding="dropout scaling in eval")
    return passed(f"deterministic in eval() mode, and equal to the dropout-free output ({how})")
