from checks import check, failed, passed
from checks._context import same, worst_difference
from checks._search import find_failure
from harness.subject import TargetFailure

VIEW_ERROR = ("view size is not compatible with input tensor", "use .reshape(...) instead")


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
)
def run(ctx):
    def prop(cfg):
        inst = ctx.build(cfg)
        x = ctx.input(cfg)
        try:
            y = inst.forward(x)
        except TargetFailure as e:
            if _is_view_error(e.message):
                return failed("`view` after `transpose` without `contiguous()`: forward raised " + e.message,
                              observed="RuntimeError from view()", expected="a result",
                              diagnosis="view after transpose without contiguous()")
            raise
        try:
            y2 = inst.forward(x, noncontig=True)
        except TargetFailure as e:
            if _is_view_error(e.message):
                return failed("forward calls view() on its (non-contiguous) input: " + e.message,
                              observed="RuntimeError from view() on a non-contiguous input", expected="a result",
                              diagnosis="view on the input")
            raise
        if not same(y2, y):
            return failed("the output changes when the same input is given with non-contiguous strides: "
                          + worst_difference(y2, y, ("non-contiguous", "contiguous")))
        return None

    outcome = find_failure(ctx, prop, min_heads=2, min_n=2)
    return outcome or passed("forward works with several heads and tokens, and on non-contiguous inputs")
