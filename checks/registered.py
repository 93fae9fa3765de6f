"""registered: every submodule and tensor the layer keeps is registered with nn.Module."""
from checks import check, failed, passed
from checks.construct import construct


@check(
    id="registered",
    claim="the layer's heads, projections and masks are registered (nn.ModuleList, register_buffer), not kept in "
          "plain Python lists, dicts or attributes",
    explanation="""nn.Module only knows the submodules and tensors assigned as attributes of the right kind. Heads
    kept in a plain Python list, or masks cached in a dict, are invisible to it: .parameters() misses their weights
    (the optimiser never trains them), .eval() does not switch off their dropout, .to(device) does not move them
    and the state_dict does not save them.""",
    fix="""Keep modules in `nn.ModuleList([...])` or `nn.ModuleDict({...})`, and tensors with
    `self.register_buffer(name, tensor)`; a mask for each length is a slice of one buffer: `mask[:n, :n]`.""",
    needs=(construct,),
    example="""self.heads = [Head(d, dh) for _ in range(H)]: a plain list of 2 modules
    list(model.parameters()) holds only out_proj's 8·8 + 8 = 72 values, not the heads' 3·8·8 = 192
    model.eval() leaves the heads' dropout on; model.to('cuda') leaves their weights on the CPU
    right: self.heads = nn.ModuleList([Head(d, dh) for _ in range(H)]): 264 parameters, all moved and trained""",
)
def registered(ctx):
    info = ctx.built(ctx.base).info
    problems = [f"{c} (a plain list/tuple/dict holding modules or tensors)" for c in info.containers]
    problems += [f"{a} (a tensor kept as a plain attribute)" for a in info.plain_tensors]
    if problems:
        heads = bool(info.containers)
        return failed("not registered with nn.Module: " + "; ".join(problems) + ": .to(), .eval(), .parameters() "
                      "and the state_dict do not reach them", observed="; ".join(problems),
                      expected="nn.ModuleList / register_buffer",
                      finding="unregistered container" if heads else "mask as a plain attribute")
    return passed("every submodule and tensor the layer keeps is registered")
