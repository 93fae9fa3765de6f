from checks import check, failed, passed
from harness.engine.search import find_failure
from reference import param_count_formula


def _explain_difference(diff: int, cfg) -> str:
    d_in, d = cfg.d_in, cfg.d_out
    known = {d: "an output projection without bias (nn.Linear(d_out, d_out) has one)",
             -d: "one extra bias vector of width d_out",
             -(d * d + d): "no output projection (concatenation alone does not combine the heads)",
             3 * d: "no Q/K/V biases although qkv_bias=True was asked",
             -3 * d: "Q/K/V biases although qkv_bias=False was asked",
             d * d + d: "a missing output projection weight or bias"}
    if diff in known:
        return "; looks like " + known[diff]
    if diff < 0 and (-diff) % (3 * d_in * d) == 0:
        return f"; that is {(-diff) // (3 * d_in * d)} extra full-width sets of Q/K/V (heads of width d_out?)"
    return ""


@check(
    id="param-count",
    claim="the parameter count is 3·d_in·d_out + d_out² + d_out (+ 3·d_out with Q/K/V biases)",
    explanation="""Q, K and V are three (d_in × d_out) matrices, the output projection is d_out × d_out plus a bias.
    264 for d = 8; 2,360,064 for GPT-2 small without Q/K/V biases, 2,362,368 with them. Another count means a
    missing or extra piece.""",
    fix="""Use three nn.Linear(d_in, d_out, bias=qkv_bias) (or one fused (d_in, 3·d_out)) and one
    nn.Linear(d_out, d_out); split the width among the heads instead of giving each head its own full-width
    projections.""",
    example="""formula: 3·d_in·d_out + d_out² + d_out (+ 3·d_out with Q/K/V biases)
    d = 8: 3·8·8 + 8² + 8 = 192 + 72 = 264, the same for H = 1, 2 and 4
    GPT-2 small (d = 768): 2,360,064 without Q/K/V biases, 2,362,368 with them (+ 3·768)
    typical wrong counts at d = 8: 256 (output projection without bias, -8), 192 (no output projection, -72),
      288 (Q/K/V biases not asked for, +24), 520 with H = 2 (every head its own 8 -> 8 Q, K, V)""",
)
def run(ctx):
    def prop(cfg):
        inst = ctx.subject.build(cfg)  # counting needs no forward pass (nor the weight-mapping proof)
        got = inst.info["param_count"]
        if "qkv_bias" in ctx.signature["accepts"]:  # an explicit argument: the module must honour it
            options = [cfg.qkv_bias]
        elif inst.layouts:
            options = [any(r in inst.layouts[0]["roles"] for r in ("bq", "bk", "bv"))]
        else:
            options = [False, True]  # cannot tell whether the module meant to have Q/K/V biases
        want = [param_count_formula(cfg.d_in, cfg.d_out, b) for b in options]
        if got in want:
            return None
        formula = f"3·{cfg.d_in}·{cfg.d_out} + {cfg.d_out}² + {cfg.d_out}" + (" + 3·%d" % cfg.d_out if options[0] else "")
        diff = want[0] - got
        looks_like = _explain_difference(diff, cfg)
        return failed(f"{got} parameters, the formula {formula} gives {want[0]} (difference {-diff:+d})"
                      + looks_like, observed=str(got), expected=str(want[0]), parameters=inst.info["params"],
                      diagnosis=looks_like.removeprefix("; looks like ") or "unexplained difference")

    return find_failure(ctx, prop) or passed("matches 3·d_in·d_out + d_out² + d_out for every configuration tried")
