import numpy as np

from checks import check, failed, passed
from checks._search import find_failure


@check(
    id="input-untouched",
    claim="forward does not modify its input tensor",
    explanation="""In-place operations on x (x += ..., x.mul_(...), x[...] = ...) change the caller's tensor: the
    residual connection around the layer then adds the wrong values, and autograd may refuse to run.""",
    fix="""Write `x = x + ...` or `y = f(x)` instead of in-place operations on the input.""",
)
def run(ctx):
    def prop(cfg):
        inst = ctx.build(cfg)
        x = ctx.input(cfg)
        for mode in ("eval", "train"):
            _, after = inst.forward(x, mode=mode, want_x_after=True)
            if after is None or after.shape != x.shape or not np.array_equal(after, x):
                changed = "its shape" if after is None or after.shape != x.shape else \
                    f"{int((after != x).sum())} of {x.size} values"
                return failed(f"forward in {mode}() mode modified its input in place ({changed} changed)",
                              observed="input changed", expected="input unchanged")
        return None

    return find_failure(ctx, prop, generated=False) or passed("the input is unchanged after forward")
