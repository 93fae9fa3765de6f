"""eval-determinism: in eval() mode, with dropout > 0, the output is deterministic and dropout is off.

A pass rests on the parent's own reference, never on the child agreeing with itself: a child that memoises its
answers and replays them (keyed by the input's bytes, by batch row) makes two passes agree, and a module with
dropout agree with a dropout-free twin given the same weights and input, whatever its dropout does
(tests/hostile/replay_dropout_*.py).  So, where the weights are mapped, the module built with dropout is given
weights and inputs it has never answered for (asked first, before any twin could see them), and its output is
compared with the numpy reference; a dropout-free twin, on weights and an input of its own, tells a layer wrong
only with dropout (a failure of this check) from one wrong whatever the dropout (reference-match's to report).
Where no mapping exists, all there is are the child's answers agreeing with each other, and the pass says so.

A layer with no dropout argument and no nn.Dropout module cannot be given a dropout > 0: it is checked as built (a
dropout of its own in forward, F.dropout(w, 0.1), still shows as two passes that differ), with the same comparisons,
and its pass states that claim (`Outcome.claim`), not "with dropout > 0".
"""
import numpy as np

from checks import check, failed, passed
from checks.output_shape import output_shape
from harness.engine.compare import compare, same, worst_difference
from harness.wire.config import Config
from harness.wire.errors import CannotDrive, HarnessFailure, TargetFailure
from reference import numpy_ref


@check(
    id="eval-determinism",
    claim="in eval() mode, with dropout > 0, the output is deterministic and dropout is off",
    explanation="""Dropout on the attention weights is for training only: nn.Dropout turns itself off in eval()
    mode, but F.dropout(w, p) with the default training=True, or training=True hard-coded, keeps dropping at
    evaluation, and generation becomes random.""",
    fix="""Use `self.dropout = nn.Dropout(p)` and `w = self.dropout(w)`, or `F.dropout(w, p, training=self.training)`,
    or `dropout_p=self.p if self.training else 0.0` for scaled_dot_product_attention.""",
    example="""CausalMHA(6, 2, 7, dropout=0.5).eval() (or every nn.Dropout set to p = 0.5), x: (2, 4, 6)
    two forward passes must be bit-identical, and equal to the reference's output with the same weights
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
    settable = by_arg or bool(inst.info.dropout_modules)  # could mha-check give the layer a dropout > 0?
    if not settable:
        how = f"built as it is: {NO_DROPOUT}"
    x = ctx.input(cfg)
    groups = [(inst, [inst.forward_request(x), inst.forward_request(x)])]
    mapped = inst.layout is not None
    if mapped:
        plain = ctx.build(base)
        probe, own = ctx.weights_for(inst, "eval-probe"), ctx.weights_for(plain, "eval-plain")
        xa, xb = ctx.input(cfg, "eval-probe"), ctx.input(cfg, "eval-plain")
        groups[0][1].extend([inst.write_request(ctx.transplanted(inst, probe)), inst.forward_request(xa)])
        groups.append((plain, [plain.write_request(ctx.transplanted(plain, own)), plain.forward_request(xb),
                               plain.write_request(ctx.transplanted(plain, probe)), plain.forward_request(xa)]))
    replies = ctx.frame_or_raise(groups)
    first, second = replies[0][0].y, replies[0][1].y
    if not np.array_equal(first, second, equal_nan=True):
        differ = f"with {how}, two forward passes in eval() mode gave different outputs: " + \
            worst_difference(second, first, ("second pass", "first pass"))
        if not by_arg and not inst.info.dropout_modules:  # nothing to set: no dropout can be to blame
            return failed(differ + "; there is no dropout argument nor nn.Dropout module to switch off: forward "
                          "changes from one call to the next (a dropout written in forward with its own rate, such "
                          "as F.dropout(x, 0.1), which stays on in eval; state it keeps between calls, such as a "
                          "cached bias or mask it rewrites; or something random drawn at every call)", config=base,
                          observed="different outputs for one input",
                          expected="identical outputs", finding="differs between calls", fix=STATE_FIX)
        if _random_without_dropout(ctx, by_arg):
            return failed(differ + "; built with dropout=0 its outputs differ too, so it is not dropout: something "
                          "in forward is random at every call (a layer or weights created in forward, torch.rand or "
                          "torch.randn, F.dropout with training=True and a p of its own)", config=cfg,
                          observed="different outputs, with dropout=0 too", expected="identical outputs",
                          finding="random in eval", fix=RANDOM_FIX)
        return failed(differ + "; dropout is still active in eval mode",
                      config=cfg, observed="different outputs", expected="identical outputs",
                      finding="dropout in eval")
    if not mapped:
        return passed(f"two forward passes in eval() mode gave identical outputs ({how}); the weights could not be "
                      "mapped, so the output was not compared with the reference: this rests on the module's "
                      "answers agreeing with each other",
                      claim="" if settable else f"in eval() mode, two forward passes give identical outputs "
                      f"({AS_BUILT})")
    return _judge(ctx, cfg, how, replies, probe, own, xa, xb, settable)


NO_DROPOUT = "no dropout argument nor nn.Dropout module to set a rate with"
AS_BUILT = (f"the layer has {NO_DROPOUT}, so it could not be built with dropout > 0: checked as it is, with whatever "
            "forward does itself")


RANDOM_FIX = ("Make every weight once in __init__ (self.proj = nn.Linear(d_out, d_out), registered) and only call it "
              "in forward; draw nothing random in forward except through dropout that follows self.training.")


STATE_FIX = ("Make forward a function of its input and weights: what it caches between calls (a mask, a position bias, "
             "rotary tables) must give the numbers it would compute afresh, and nothing random may be drawn in forward "
             "except through dropout that follows self.training.")


def _random_without_dropout(ctx, by_arg: bool) -> bool:
    """Whether the module built with dropout=0 (every nn.Dropout set to p=0 where no argument sets it) also gives two
    different outputs for one input in eval() mode: then the randomness is not dropout's (asked only after a
    failure, so a passing module costs nothing more)."""
    base = ctx.base.to_dict()
    plain = ctx.build(Config(**{**base, "dropout": 0.0}), force_dropout=None if by_arg else 0.0)
    x = ctx.input(ctx.base, "eval-random")
    try:
        replies = ctx.frame_or_raise([(plain, [plain.forward_request(x), plain.forward_request(x)])])
    except (TargetFailure, CannotDrive, HarnessFailure):  # not built or run with dropout=0: no second look
        return False
    return not np.array_equal(replies[0][0].y, replies[0][1].y, equal_nan=True)


def _judge(ctx, cfg, how, replies, probe, own, xa, xb, settable: bool = True):
    """The module with dropout against the reference; where it differs, the dropout-free twin says whether dropout
    is to blame (the twin equals the reference on its own weights) or the layer is wrong whatever the dropout."""
    with_dropout, twin, twin_same = replies[0][3].y, replies[1][1].y, replies[1][3].y
    mismatch = compare(with_dropout, numpy_ref.forward(xa, cfg.heads, probe, rope=ctx.rope))
    if mismatch is None:
        return passed(f"deterministic in eval() mode, and equal to the reference's dropout-free output with the "
                      f"same weights ({how})",
                      claim="" if settable else "in eval() mode, the output is deterministic and equals the "
                      f"reference's with the same weights ({AS_BUILT})")
    if compare(twin, numpy_ref.forward(xb, cfg.heads, own, rope=ctx.rope)) is None:
        return failed(f"with {how}, the eval() output differs from the reference's with the same weights: "
                      + mismatch.describe(("p=0.5", "reference")) + "; built with dropout=0 the module equals the "
                      "reference, so dropout (or its 1/(1-p) scaling) is applied in eval mode", config=cfg,
                      observed="output depends on p in eval()", expected="the reference's output, as with p=0",
                      finding="dropout scaling in eval")
    if not same(with_dropout, twin_same):
        return failed(f"with {how}, the eval() output differs from the same module built with dropout=0: "
                      + worst_difference(with_dropout, twin_same, ("p=0.5", "p=0"))
                      + "; dropout (or its 1/(1-p) scaling) is applied in eval mode", config=cfg,
                      observed="output depends on p in eval()", expected="the same output as with p=0",
                      finding="dropout scaling in eval")
    if not settable:  # the "dropout=0" twin is the same layer: all there is, is two passes agreeing
        return passed(f"two forward passes in eval() mode gave identical outputs ({how}); its output differs from "
                      "the reference's (reference-match reports that), so this rests on the module's answers "
                      "agreeing with each other",
                      claim=f"in eval() mode, two forward passes give identical outputs ({AS_BUILT})")
    return passed(f"deterministic in eval() mode, and equal to the same module built with dropout=0 ({how}); its "
                  "output differs from the reference's with or without dropout (reference-match reports that), so "
                  "this rests on the module's answers agreeing with each other")
