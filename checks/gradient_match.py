"""gradient-match: gradients for the input and for every weight equal the reference's."""
import numpy as np

from checks import check, failed, passed
from checks.output_shape import output_shape
from harness.engine.compare import close, worst_difference
from reference import numpy_ref

NAMES = {"x": "the input", "wq": "W_q", "wk": "W_k", "wv": "W_v", "wo": "W_o",
         "bq": "b_q", "bk": "b_k", "bv": "b_v", "bo": "the output bias"}


FORWARD_DIFFERS_FIX = """Make the outputs right first (reference-match says where they differ): gradients of a
    different function differ too, and nothing need be detached.  If the outputs match and the gradients still do
    not, keep the forward differentiable: no torch.no_grad(), .detach(), .data, .numpy() or .item()."""


@check(
    id="gradient-match",
    claim="gradients for the input and for every weight equal the reference's",
    explanation="""A layer can compute the right forward values and still train wrongly: attention weights
    computed under torch.no_grad, a .detach() or .data in the middle, or an in-place change that autograd cannot
    see, all cut the gradient. mha-check back-propagates the same upstream gradient through your module and the
    reference and compares the gradients of the input and of Q, K, V and the output projection.""",
    fix="""Keep the whole forward differentiable: no torch.no_grad(), .detach(), .data, .numpy() or .item() on the
    path from x to the output.""",
    needs=(output_shape,),
    weights=True,
    example="""x: (2, 3, 8) and a random upstream gradient g = dL/dy: (2, 3, 8) (L = sum(g * y)), same weights in your
      module and in the reference
    compared within 1e-5: dL/dx (2, 3, 8), dL/dW_q, dL/dW_k, dL/dW_v, dL/dW_o (8 × 8 each), dL/db_o (8)
    softmax under torch.no_grad(): y is exact, but dL/dW_q and dL/dW_k are zero and dL/dx is wrong
      (only the paths through V and W_o remain)
    keys computed with W_q: dL/dW_k is zero; x /= 2 in forward: autograd raises on the leaf x""",
)
def gradient_match(ctx):
    def holds(cfg):
        inst = ctx.build(cfg)
        w = ctx.weights_for(inst, "grad")
        ctx.transplant(inst, w)
        x = ctx.input(cfg)
        gy = ctx.rng("gy", cfg).standard_normal((cfg.batch, cfg.n, cfg.d_out))
        got = inst.vjp(x, gy)
        if got.no_graph:
            return failed("the output does not require grad: it was detached or computed under torch.no_grad",
                          observed="no gradient", expected="gradients for the input and the weights",
                          finding="no gradient")
        cache = {}
        expected_y = numpy_ref.forward(x, cfg.heads, w, cache=cache, rope=ctx.rope)
        want = numpy_ref.backward(gy, w, cache)
        mine = {"x": got.gx, **got.grads}
        wrong = [(k, mine[k]) for k in ["x"] + list(w.as_dict()) if mine.get(k) is not None
                 and not close(mine[k], want[k])]
        if not wrong:
            return None
        names = ", ".join(NAMES[k] for k, _ in wrong)
        key, value = wrong[0]
        zero = " (all zero)" if not np.any(value) else ""
        forward_differs = got.y is not None and not close(got.y, expected_y)
        return failed(f"wrong gradient for {names}: for {NAMES[key]}{zero} " + worst_difference(value, want[key])
                      + ("; the outputs differ too, so the gradients follow from that" if forward_differs else ""),
                      observed=f"wrong gradients: {names}", expected="reference gradients",
                      finding="wrong gradients: " + ",".join(k for k, _ in wrong),
                      fix=FORWARD_DIFFERS_FIX if forward_differs else "")

    return ctx.find_failure(holds) or passed("input and weight gradients equal the reference's")
