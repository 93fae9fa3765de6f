"""mask-fill (a lesson rule): the future is masked with -inf, so that no score, however large, gets past it.

causal-leakage judges the math at every magnitude a model reaches (gradients, ordinary perturbations, real scores
near -5e4).  A finite mask added to the scores (`scores + torch.where(mask, -1e9, 0)`, the annotated transformer's
convention written additively) passes all of that in float64, yet it is not the lesson's mask: a future score above
its size outweighs it, and -1e9 does not fit in half precision.  Only future tokens of size 1e30 show it, so this
rule perturbs with exactly those, on weights of its own where they are mapped, and is judged only where
causal-leakage passed (for a leaking layer, that check already says what is wrong).
"""
from checks import check, failed, passed
from checks.causal_leakage import causal_leakage, moved, perturbed


@check(
    id="mask-fill",
    claim="no future token, however large, changes an earlier output: the masked scores are -inf, not a finite value",
    explanation="""The lesson fills the masked scores with float("-inf"), so that the softmax gives the future a
    weight of exactly 0 whatever the other scores are. A finite mask added to the scores, such as -1e9, gives the
    same numbers while every score stays far below its size, and a different layer when one does not: tokens of
    size 1e30 push a future score past it. In half precision -1e9 is out of range altogether.""",
    fix="""`scores = scores.masked_fill(mask[:n, :n], float("-inf"))` (or `is_causal=True` in
    scaled_dot_product_attention) instead of adding a large negative number to the scores.""",
    needs=(causal_leakage,),
    kind="rule",
    example="""x: (2, 5, 8); the tokens after position 0 are replaced by noise of size 1e30
    y[:, 0] must stay bit-identical (position 0 sees only itself)
    scores + where(mask, -1e9, 0): the score of token 0 with token 1 is about 1e30, and 1e30 - 1e9 = 1e30 wins the
      softmax: y[:, 0] becomes token 1's value
    masked_fill(mask, -inf): the future gets weight 0, y[:, 0] does not change""",
)
def mask_fill(ctx):
    def holds(cfg):
        inst = ctx.build(cfg)
        if inst.layout is not None:  # weights of its own: an earlier check's transplant may hide the leak (W_q = 0)
            ctx.transplant(inst, ctx.weights_for(inst, "mask-fill"))
        inputs, labels = perturbed(ctx.input(cfg, "mask-fill"), cfg, ctx, ("huge",))
        outcome = moved(inst.forward_many(inputs), labels)
        if outcome is None:
            return None
        return failed(outcome.message.replace(": the future leaks into the past", "") + ": the future is masked by a "
                      "finite value that large scores get past (a -inf fill never lets them)",
                      observed=outcome.observed, expected=outcome.expected, finding="finite mask")

    return ctx.find_failure(holds, generated=False) or passed(
        "future tokens of size 1e30 leave earlier outputs unchanged: the mask holds whatever the scores")
