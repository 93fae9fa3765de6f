from checks import check, failed, passed
from harness.sandbox.subject import TargetFailure

DEVICE_WORDS = ("same device", "expected device", "on device", "device type")  # a device mix, not e.g. .item()


@check(
    id="mask-buffer",
    claim="the causal mask travels with the module: a registered buffer, or made on x.device in forward",
    explanation="""A mask stored as a plain tensor attribute (self.mask = torch.triu(...)) is not moved by
    module.to(device) or .cuda(), and is not in the state_dict: the layer works on the CPU and breaks on a GPU.
    mha-check shows this without a GPU by moving the module to PyTorch's 'meta' device and running it.""",
    fix="""`self.register_buffer("mask", torch.triu(torch.ones(L, L), diagonal=1).bool())`, or build the mask in
    forward with `device=x.device`, or use scaled_dot_product_attention(..., is_causal=True).""",
    example="""d = 6, H = 2, context_length = 7: the mask is a (7, 7) bool tensor, triu(ones(7, 7), 1)
    plain attribute self.mask = ...: the state_dict has q.weight, k.weight, v.weight, out.weight, out.bias,
      no 'mask', and model.to('meta') leaves self.mask on the CPU
    torch.ones(n, n) made in forward without device=: after model.to('meta'), forward on x (2, 4, 6) raises
      'Tensor on device meta is not on the expected device cpu!'
    right: register_buffer('mask', ...): model.to('meta') moves it, and y = model(x) is on 'meta'""",
)
def run(ctx):
    inst = ctx.build(ctx.base)
    plain = inst.info["plain_tensors"]
    if plain:
        return failed(f"tensor attribute(s) {', '.join(plain)} are not registered buffers: they stay behind on "
                      "module.to(device) and are missing from the state_dict",
                      observed=f"plain tensor attributes: {', '.join(plain)}", expected="registered buffers",
                      diagnosis="mask as a plain attribute")
    cfg = ctx.base
    square = [n for n, shape in inst.info["params"] if shape == [cfg.context_length, cfg.context_length]]
    if square:
        return failed(f"parameter(s) {', '.join(square)} look like a mask stored as a trainable nn.Parameter; "
                      "register it as a buffer", observed="mask as parameter", expected="buffer")
    created = inst.call("factories", {"x": ctx.input(cfg)})[0]["created"]
    if not created:
        return passed("no plain tensor attributes, and forward creates no tensor without device=")
    made = "; ".join(f"{c['call']} of shape {tuple(c['shape'])} at {c['at']}" for c in created[:3])
    try:  # a tensor made without device=: see whether it really stays behind (costs a meta-device import)
        meta = inst.meta_forward((cfg.batch, cfg.n, cfg.d_in))
    except TargetFailure as e:
        if any(w in e.message.lower() for w in DEVICE_WORDS):
            return failed(f"forward creates tensors without device= ({made}); after module.to(device) they "
                          "stay on the CPU and the forward fails: " + e.message,
                          observed="device mismatch", expected="the forward runs on the module's device",
                          diagnosis="mask created on the wrong device")
        return passed(f"no plain tensor attributes; the meta-device run was not possible ({e.message[:120]})")
    if meta.get("device") != "meta":
        return failed(f"after module.to('meta') the output is on {meta.get('device')}: something in forward "
                      "creates tensors on a fixed device", observed=str(meta.get("device")), expected="meta")
    return passed("mask registered (or built on the input's device): the module runs after .to('meta')")
