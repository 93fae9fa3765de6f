"""input-untouched: forward does not modify its input tensor."""
import numpy as np

from checks import check, failed, passed
from checks.output_shape import output_shape

MODES = ("eval", "train")  # the input must survive both: a training branch may have its own in-place step


@check(
    id="input-untouched",
    claim="forward does not modify its input tensor",
    explanation="""In-place operations on x (x += ..., x.mul_(...), x[...] = ...) change the caller's tensor: the
    residual connection around the layer then adds the wrong values, and autograd may refuse to run.""",
    fix="""Write `x = x + ...` or `y = f(x)` instead of in-place operations on the input.""",
    example="""x: (2, 3, 8) is copied before forward; after y = model(x), in eval() and in train() mode, all 48 values
      of x must be unchanged
    x /= sqrt(dh) = 2 inside forward changes all 48 (x[0, 0, 0] = 1.0 -> 0.5, and 0.25 after a second call)
    right: x = x / 2 makes a new tensor and leaves the caller's x alone""",
    needs=(output_shape,),
)
def input_untouched(ctx):
    def holds(cfg):
        inst = ctx.build(cfg)
        x = ctx.input(cfg)
        replies = inst.calls([inst.forward_request(x, mode, want_x_after=True) for mode in MODES])
        for mode, reply in zip(MODES, replies):
            after = reply.x_after
            if after is None or after.shape != x.shape or not np.array_equal(after, x):
                changed = "its shape" if after is None or after.shape != x.shape else \
                    f"{int((after != x).sum())} of {x.size} values"
                return failed(f"forward in {mode}() mode modified its input in place ({changed} changed)",
                              observed="input changed", expected="input unchanged", finding="input modified")
        return None

    return ctx.find_failure(holds, generated=False) or passed("the input is unchanged after forward")
