"""parameters-used: every parameter receives a gradient: forward uses it, and not under no_grad or detach."""
from checks import check, failed, passed
from checks.output_shape import output_shape
from harness.engine.mapping import as_it_is
from harness.wire import messages as m


@check(
    id="parameters-used",
    claim="every parameter of the layer receives a gradient from the output (forward uses it, differentiably)",
    explanation="""A parameter that forward never uses, or uses under torch.no_grad() or after .detach(), gets no
    gradient: it is never trained, yet it is counted, saved and moved like the others. A projection created in
    __init__ and forgotten in forward is the usual cause.""",
    fix="""Use every parameter you create in forward, without torch.no_grad() or .detach() on its path to the output,
    or delete the ones you do not need.""",
    needs=(output_shape,),
    example="""self.proj = nn.Linear(8, 8) created, forward returns self.out(ctx) only
    after (y * g).sum().backward(): proj.weight.grad is None and proj.bias.grad is None
    right: every parameter's .grad is a tensor after backward (a key bias gets a gradient of exactly 0, which
      is fine: softmax ignores a constant added to a whole row of scores)""",
)
def parameters_used(ctx):
    cfg = ctx.base
    inst = ctx.build(cfg)
    gy = ctx.rng("used", cfg).standard_normal((cfg.batch, cfg.n, cfg.d_out))
    # the layer as it is, its normalisations on, even where the other checks call it with them switched off
    # (harness.engine.mapping, 4.): a norm's parameters are the layer's as much as W_q is
    style = as_it_is(inst.info, inst.style)
    (got,) = inst.calls([m.Vjp(inst.handle, ctx.input(cfg, "used"), gy, "eval", inst.layout, style)])
    if got.unused:
        return failed(f"parameter(s) {', '.join(got.unused)} receive no gradient: forward never uses them, or uses "
                      "them under torch.no_grad() / .detach()", observed=f"no gradient for {', '.join(got.unused)}",
                      expected="a gradient for every parameter",
                      finding="unused parameter" if not got.no_graph else "no gradient")
    return passed("every parameter receives a gradient")
