"""mask-fill (a lesson rule): the future is masked with -inf, so that no score, however large, gets past it.

causal-leakage judges the math at every magnitude a model reaches (gradients, ordinary perturbations, real scores
near -5e4).  A finite mask added to the scores (`scores + torch.where(mask, -1e9, 0)`, the annotated transformer's
convention written additively) passes all of that in float64, yet it is not the lesson's mask: a future score above
its size outweighs it, and -1e9 does not fit in half precision.  Only future tokens of size 1e30 show it, so this
rule perturbs with exactly those, on weights of its own where they are mapped, and is judged only where
causal-leakage passed (for a leaking layer, that check already says what is wrong).

A finite fill (`scores.masked_fill(mask, -1e9)`) replaces the future scores whatever the tokens, so no future token
gets past it; it fails when the allowed scores fall below it instead.  Where the weights are mapped, a second probe
sets W_k = -W_q (every query's score with its own token is then -|q|^2) and makes the tokens 1e6 times larger: the
first token's only allowed score is about -1e12, any finite fill wins the softmax, and its output follows the future
tokens.  A student found this gap: `masked_fill(mask, -1e9)` passed the rule that says "-inf, not a finite value".
Where no configuration's weights could be set (no reading proven), that second probe never runs and a finite fill
cannot be told from -inf: the rule is then not decided (labml-nn's NeoX layer, whose -10,000 fill passed).
"""
import numpy as np
from dataclasses import replace

from checks import Outcome, Status, cannot_tell, check, failed, passed
from checks.causal_leakage import along_tokens, answers_again, causal_leakage, moved, perturbed
from harness.engine.compare import compare
from reference import numpy_ref

BELOW_ANY_FILL = 1e6  # the tokens' scale in the second probe: scores of order -1e12, below any finite fill in use


@check(
    id="mask-fill",
    claim="no future token, however large, changes an earlier output: the masked scores are -inf, not a finite value",
    explanation="""The lesson fills the masked scores with float("-inf"), so that the softmax gives the future a
    weight of exactly 0 whatever the other scores are. A finite mask added to the scores, such as -1e9, gives the
    same numbers while every score stays far below its size, and a different layer when one does not: tokens of
    size 1e30 push a future score past it. In half precision -1e9 is out of range altogether.""",
    fix="""`scores = scores.masked_fill(mask[:n, :n], float("-inf"))` (or `is_causal=True` in
    scaled_dot_product_attention): -inf, not a large negative number added to the scores or filled in.""",
    needs=(causal_leakage,),
    kind="rule",
    example="""x: (2, 5, 8); the tokens after position 0 are replaced by noise of size 1e30
    y[:, 0] must stay bit-identical (position 0 sees only itself)
    scores + where(mask, -1e9, 0): the score of token 0 with token 1 is about 1e30, and 1e30 - 1e9 = 1e30 wins the
      softmax: y[:, 0] becomes token 1's value
    masked_fill(mask, -inf): the future gets weight 0, y[:, 0] does not change
    second probe (weights mapped): W_k = -W_q and every token 1e6 times larger, the future changed
    token 0's only allowed score q0.k0 = -|q0|^2 is about -1e12; masked_fill(mask, -1e9) gives the future -1e9,
      which wins the softmax: y[:, 0] becomes the mean of the future values and moves with them""",
)
def mask_fill(ctx):
    low_probed = []  # configurations whose weights could be set for the second probe, and whose outputs under it
    # are the lesson's layer's (so its scores were the probe's)
    unlike = []  # configurations probed so whose outputs are not the reference's: the probe proved nothing there
    math_differs = []  # ... and whose outputs with ordinary weights are not the reference's either: the math's to say
    unsteady = []  # configurations whose forward answered one input differently twice: no fill told from noise there

    def holds(cfg):
        inst = ctx.build(cfg)
        ordinary = ctx.weights_for(inst, "mask-fill") if inst.layout is not None else None
        if ordinary is not None:  # weights of its own: an earlier check's transplant may hide the leak (W_q = 0)
            ctx.transplant(inst, ordinary)
        inputs, labels = perturbed(ctx.input(cfg, "mask-fill"), cfg, ctx, ("huge",))
        raw = inst.forward_many(inputs)
        plain = (inputs[0], raw[0])  # the unperturbed input and its output, under the ordinary weights
        outputs = along_tokens(raw, cfg)  # an output of the wrong shape by its token axis
        if outputs is None:  # (causal-leakage judged it so): no single axis is the tokens' here, nothing to judge
            return None
        outcome = moved(outputs, labels)
        if outcome is not None and not answers_again(inst, inputs[0], raw[0]):
            unsteady.append(cfg)
            return None  # a forward that moves between two calls on one input: no evidence of a fill
        if outcome is not None:
            return failed(outcome.message.replace(": the future leaks into the past", "") + ": the future is masked "
                          "by a finite value that large scores get past (a -inf fill never lets them)",
                          observed=outcome.observed, expected=outcome.expected, finding="finite mask")
        if inst.layout is None:
            return None
        low = _scores_below_any_fill(ctx.weights_for(inst, "mask-fill-low"), cfg.heads)
        ctx.transplant(inst, low)
        # only the first token's scores are all below the fill: the tokens after it changed, its output watched
        inputs, labels = perturbed(ctx.input(cfg, "mask-fill-low"), cfg, ctx, ("ordinary",), splits=(0,))
        raw = inst.forward_many([x * BELOW_ANY_FILL for x in inputs])
        outputs = along_tokens(raw, cfg)
        if outputs is None:
            return None
        outcome = moved(outputs, labels,
                        why=" with every query's score for its own token about -1e12 (W_k = -W_q, tokens 1e6 times "
                            "larger)", kinds=("ordinary",))
        if outcome is None:  # nothing moved: evidence only where the layer computes the lesson's scores under these
            # weights (keys made with W_q, a student's trial, score each token with itself at +|q|^2, never below a
            # fill, and its -1e9 passed as -inf)
            like = compare(raw[0], numpy_ref.forward(inputs[0] * BELOW_ANY_FILL, cfg.heads, low, rope=ctx.rope))
            if like is not None and compare(plain[1], numpy_ref.forward(plain[0], cfg.heads, ordinary,
                                                                        rope=ctx.rope)) is not None:
                math_differs.append(cfg)  # not the lesson's layer with ordinary weights either: a bug of the math
            else:
                (low_probed if like is None else unlike).append(cfg)
            return None
        if not answers_again(inst, inputs[0] * BELOW_ANY_FILL, raw[0]):
            unsteady.append(cfg)
            return None
        return failed(outcome.message.replace(": the future leaks into the past", "") + ": the future is masked by a "
                      "finite value that scores below it lose to (a -inf fill never lets the future in)",
                      observed=outcome.observed, expected=outcome.expected, finding="finite fill")

    failure = ctx.find_failure(holds, generated=False)
    if failure or low_probed:
        return failure or _passed()
    if unsteady and not unlike:  # instructor trial 9: "could not tell which of your parameters are W_q..." said of
        # a layer whose dropout stays on in eval(), its parameters matched and its mistake named
        return Outcome(Status.SKIP, "not judged: your layer gave two different outputs for the same input in eval() "
                       "mode (eval-determinism says why), so a future token's effect cannot be told from that noise; "
                       "fix that first", details={"usable": True})
    if math_differs and not unlike:  # the math's checks say where it differs; this rule is not for such a layer
        return Outcome(Status.SKIP, "not judged: with mha-check's weights your layer's outputs are not the lesson's "
                       "layer's (reference-match says where), and telling a -inf fill from a finite one needs its "
                       "scores; fix the math first", details={"usable": True})
    if unlike:
        return cannot_tell(
            "future tokens of size 1e30 leave earlier outputs unchanged, but with W_k = -W_q written into your layer "
            "its outputs are not the lesson's layer's, so its scores were not pushed below a finite fill (the "
            "probe needs the lesson's scores; reference-match and gradient-match say where your layer differs): "
            "a masked_fill with -1e9 would pass here too; `mha-check trace` shows the value your mask fills with")
    return cannot_tell(
        "future tokens of size 1e30 leave earlier outputs unchanged, but mha-check could not set your weights (it "
        "could not tell which of your parameters are W_q, W_k, W_v and W_o), so it could not push the allowed "
        "scores below a finite fill: a masked_fill with -1e9 or -1e4 would pass that probe too", help=MAP_HELP)


MAP_HELP = ("say which parameters play the roles (--map q=NAME --map k=NAME --map v=NAME --map o=NAME); `mha-check "
            "trace` shows the value your mask fills the scores with")


def _passed():
    return passed(
        "future tokens of size 1e30, and allowed scores of about -1e12 where the weights could be set, leave earlier "
        "outputs unchanged: the mask holds whatever the scores")


def _scores_below_any_fill(w, heads: int):
    """`w` with W_k = -W_q (and b_k = -b_q): each query's score with its own token is -|q|^2 / sqrt(dh), so scaled
    tokens push the first token's only allowed score below any finite fill.  Grouped keys (fewer key heads): each
    query head is made its key head's negation, which gives the same."""
    if w.wk.shape == w.wq.shape:
        return replace(w, wk=-w.wq, bk=None if w.bq is None else -w.bq)
    dh = w.wq.shape[0] // heads
    group = heads // (w.wk.shape[0] // dh)  # query heads per key head
    rows = np.arange(w.wq.shape[0])
    kv_row = (rows // dh) // group * dh + rows % dh  # the key row each query row is matched with
    return replace(w, wq=-w.wk[kv_row], bq=None if w.bk is None else -w.bk[kv_row])
