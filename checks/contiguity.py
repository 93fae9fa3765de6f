from checks import check, failed, passed
from harness.engine.context import same, worst_difference
from harness.engine.search import find_failure
from harness.sandbox.subject import TargetFailure

VIEW_ERROR = ("view size is not compatible with input tensor", "use .reshape(...) instead")


CASES = (  # (non-contiguous input?, what it means, observed, diagnosis): the contiguous input first
    (False, "`view` after `transpose` without `contiguous()`: forward raised ", "RuntimeError from view()",
     "view after transpose without contiguous()"),
    (True, "forward calls view() on its (non-contiguous) input: ",
     "RuntimeError from view() on a non-contiguous input", "view on the input"),
)


def _is_view_error(message: str) -> bool:
    return any(s in message for s in VIEW_ERROR)


@check(
    id="contiguity",
    claim="no view() on a non-contiguous tensor: forward works after transposes and on non-contiguous inputs",
    explanation="""After transpose(1, 2) a tensor is no longer laid out contiguously in memory, and view() then
    raises "view size is not compatible with input tensor's size and stride". It only shows when H > 1 and n > 1,
    so a quick test with one head or one token misses it. A forward that calls view() on its input also breaks
    for a sliced or transposed input.""",
    fix="""Call `.contiguous()` before `.view(...)` after a transpose (`ctx.transpose(1, 2).contiguous().view(B, n,
    d)`), or use `.reshape(...)`, which copies when it must.""",
    example="""H = 2, n = 3: w @ v (2, 2, 3, 4) -> .transpose(1, 2) -> (2, 3, 2, 4), strides (24, 4, 12, 1):
      not contiguous
    view(2, 3, 8) on it raises 'view size is not compatible with input tensor's size and stride': a token's
      8 features sit at offsets 0-3 and 12-15, not at 8 evenly spaced places
    with H = 1 or n = 1 the same view works, so the check uses H ≥ 2 and n ≥ 2
    second run: the same x (2, 3, 8) as x.transpose(0, 1).contiguous().transpose(0, 1), same values with
      strides (8, 16, 1): forward must not raise and must give the same y""",
)
def run(ctx):
    def prop(cfg):
        inst = ctx.build(cfg)
        x = ctx.input(cfg)
        outputs = []
        for noncontig, mistake, observed, diagnosis in CASES:
            try:
                outputs.append(inst.forward(x, noncontig=noncontig))
            except TargetFailure as e:
                if not _is_view_error(e.message):
                    raise
                return failed(mistake + e.message, observed=observed, expected="a result", diagnosis=diagnosis)
        y, y2 = outputs
        if not same(y2, y):
            return failed("the output changes when the same input is given with non-contiguous strides: "
                          + worst_difference(y2, y, ("non-contiguous", "contiguous")))
        return None

    outcome = find_failure(ctx, prop, min_heads=2, min_n=2)
    return outcome or passed("forward works with several heads and tokens, and on non-contiguous inputs")
