"""mask-buffer: the causal mask travels with the module.  Judged by what happens after `.to("meta")`, PyTorch's
device without data: a mask kept as a plain attribute, in a dict or a list, or made in forward without `device=`,
stays on the CPU and the forward fails there exactly as it would on a GPU."""
import re

from checks import cannot_tell, check, failed, passed
from checks.output_shape import output_shape
from harness.wire import messages as m
from harness.wire.errors import TargetFailure

DEVICE_WORDS = ("same device", "expected device", "on device", "device type", "devices")  # a device mix


@check(
    id="mask-buffer",
    claim="the causal mask travels with the module: a registered buffer, or made on x.device in forward",
    explanation="""A mask stored as a plain tensor attribute (self.mask = torch.triu(...)), or cached in a dict or
    a list, is not moved by module.to(device) or .cuda(), and is not in the state_dict: the layer works on the CPU
    and breaks on a GPU. mha-check shows this without a GPU by moving the module to PyTorch's 'meta' device and
    running it.""",
    fix="""`self.register_buffer("mask", torch.triu(torch.ones(L, L), diagonal=1).bool())`, or build the mask in
    forward with `device=x.device`, or use scaled_dot_product_attention(..., is_causal=True).""",
    needs=(output_shape,),
    example="""d = 6, H = 2, context_length = 7: the mask is a (7, 7) bool tensor, triu(ones(7, 7), 1)
    plain attribute self.mask = ...: the state_dict has q.weight, k.weight, v.weight, out.weight, out.bias,
      no 'mask', and model.to('meta') leaves self.mask on the CPU
    torch.ones(n, n) made in forward without device=: after model.to('meta'), forward on x (2, 4, 6) raises
      'Tensor on device meta is not on the expected device cpu!'
    right: register_buffer('mask', ...): model.to('meta') moves it, and y = model(x) is on 'meta'""",
)
def mask_buffer(ctx):
    cfg = ctx.base
    inst = ctx.build(cfg)
    square = [p.name for p in inst.info.params if p.shape == [cfg.context_length, cfg.context_length]]
    if square:
        frozen = set(getattr(inst.info, "frozen", None) or [])
        if all(name in frozen for name in square):  # nn.Parameter(mask, requires_grad=False): it moves, yet counts
            return failed(f"parameter(s) {', '.join(square)} look like a mask stored as an nn.Parameter with "
                          "requires_grad=False: it moves with the module, but it is no weight, and "
                          "model.parameters() still yields it (the lesson's count, sum(p.numel() for p in "
                          f"model.parameters()), gains its {cfg.context_length}x{cfg.context_length} entries, and an "
                          "optimizer is handed it); register it as a buffer",
                          observed="mask as a frozen parameter", expected="buffer", finding="mask as parameter")
        return failed(f"parameter(s) {', '.join(square)} look like a mask stored as a trainable nn.Parameter; "
                      "register it as a buffer", observed="mask as parameter", expected="buffer",
                      finding="mask as parameter")
    # followed on this module, and on one no forward has run (what a layer makes lazily, at its first call, shows
    # there), in one round trip: the second answer counts only where the first shows nothing, as if asked then
    x, fresh = ctx.input(cfg), ctx.build(cfg, fresh="first forward followed")
    answers = ctx.frame([(i, [m.Devices(i.handle, x, i.style)]) for i in (inst, fresh)])
    if isinstance(answers[0], BaseException):
        raise answers[0]
    followed, first_call = answers[0][0], None
    if not followed.mixes:
        if isinstance(answers[1], BaseException):
            raise answers[1]
        inst, followed = fresh, answers[1][0]
        first_call = ctx.build(cfg, fresh="first forward on meta") if followed.mixes else None
    caller = _callers_mask(inst)
    if not followed.mixes:  # every tensor that meets the input's moves with the module: no device run needed
        if caller:
            return passed(_not_the_layers(caller, "every tensor of the layer's own that your forward combines with "
                                                  "the input moves with the module (registered buffers and "
                                                  "parameters, or made on the input's device)"))
        return passed("every tensor your forward combines with the input moves with the module (registered "
                      "buffers and parameters, or made on the input's device)")
    where = _where(followed.mixes)
    finding, fix = ("mask stays on the CPU", "") if _mask_like(followed.mixes, cfg) else \
        ("a tensor stays on the CPU", TENSOR_FIX)  # positions, rotary tables: not the mask mistake
    if _unregistered_weights(inst, followed):
        finding, fix = "weights stay on the CPU", ""
    cached = _cached_by_forward(inst, followed)
    if cached and finding == "mask stays on the CPU":
        finding, fix = "mask cached by forward", CACHE_FIX.format(name=cached[0])
    try:  # the exact test: PyTorch's meta device, where a tensor left on the CPU fails as it would on a GPU (for
        # what a first forward makes, a module moved there before any: on a GPU, .cuda() before the first call)
        meta = first_call.meta_forward(ctx.input(cfg).shape) if first_call else ctx.meta_forward(inst, ctx.input(cfg))
    except TargetFailure as e:
        if any(w in e.message.lower() for w in DEVICE_WORDS):
            return failed(f"after module.to(device) your forward fails: {where} ({_suspects(inst, followed)}): "
                          + e.message[:300], observed="device mismatch",
                          expected="the forward runs on the module's device", finding=finding, fix=fix)
        return cannot_tell(f"{where}, but mha-check could not confirm it on the meta device ({e.message[:200]})",
                           help="register such tensors as buffers, or make them with device=x.device")
    if meta.device != "meta":
        return failed(f"after module.to('meta') the output is on {meta.device}: {where}", observed=meta.device,
                      expected="meta", finding=finding, fix=fix)
    if any(m.parameter for m in followed.mixes):  # the meta device lets a matmul with CPU weights pass; a GPU not
        return failed(f"weights the module does not register stay on the CPU when it moves: {where}",
                      observed="unregistered parameters on the CPU", expected="registered parameters",
                      finding="weights stay on the CPU")
    if caller:
        return passed(_not_the_layers(caller, "the module runs after .to('meta')"))
    return passed("the module runs after .to('meta'): its mask moves with it (a registered buffer, or made on the "
                  "input's device)")


def _unregistered_weights(inst, followed) -> bool:
    """Every tensor left behind is a weight, and the module keeps modules or tensors in a plain list or dict: the
    projections of a plain list (`[nn.Linear(d, d) for _ in range(3)]`).  Found as such whether or not the meta
    device lets the forward through (a matrix product with CPU weights passes there, a bias added fails), and told
    to make no tensor on the input's device: they are to be registered."""
    return bool(inst.info.containers) and not followed.created and all(m.parameter for m in followed.mixes)


def _callers_mask(inst) -> str | None:
    """The argument through which forward is given its causal mask in the proven call (`mask`, `attn_mask`), or None
    when forward makes or keeps its own (called with x alone, or with a flag such as is_causal=True)."""
    styles = inst.info.call_styles  # (a style index past them: the same call with x sequence first)
    found = re.search(r"(\w+)=causal mask", styles[inst.style % len(styles)]) if styles and inst.style >= 0 else None
    return found.group(1) if found else None


def _not_the_layers(argument: str, checked: str) -> str:
    """A layer whose forward takes the mask from its caller keeps no mask to move: mha-check passes it one made on
    the input's device, so "the mask moves with the module" would pass without evidence.  What the check still
    shows is that nothing else the forward uses (positions, rotary tables, a mask of its own besides) stays behind;
    a failure there is a real bug (modded-nanogpt's rotary cache).  A skip would be no better: the claim is not
    broken, and a skipped check of the math makes a correct layer "cannot tell"."""
    return (f"does not apply to the mask: your forward takes its causal mask from the caller ({argument}=, which "
            f"mha-check made on the input's device), so moving it is the caller's job; checked instead: {checked}")


TENSOR_FIX = """Make every tensor your forward creates on the input's device (`torch.arange(n, device=x.device)`),
    or register a cached one as a buffer (`self.register_buffer("cos", cos, persistent=False)`), so that
    `.to(device)` moves it with the module."""
MASK_OPS = ("masked_fill", "masked_fill_", "where", "scaled_dot_product_attention", "add", "__add__", "__radd__",
            "add_", "__iadd__", "__and__", "logical_and", "__invert__", "logical_not", "__getitem__", "__setitem__")


def _mask_like(mixes, cfg) -> bool:
    """Whether a tensor left on the CPU is used as the causal mask (masked_fill, where, an additive -inf matrix,
    SDPA's attn_mask, indexing).  A position index or a rotary table left behind (multiplied in) is a device bug
    too, but not the mask mistake, whose story and fix would send the student to a mask they do not have."""
    return any(m.op in MASK_OPS and len(m.shape) >= 2 and m.shape[-1] == m.shape[-2] for m in mixes)


def _cached_by_forward(inst, followed) -> list[str]:
    """Tensors that forward stored as plain attributes of the module (not there when it was built: a mask made
    lazily and kept for the next calls), where that forward made nothing without device=.  Such a cache is made on
    the device of the first input and stays there when the module moves: it is neither a mask made without device=
    (mask-no-device, whose fix the student may well have applied) nor one stored in __init__."""
    if followed.created:
        return []
    return [a for a in getattr(followed, "kept", []) if a not in inst.info.plain_tensors]


CACHE_FIX = """Keep what forward caches in a buffer, which moves with the module: register it in __init__
    (`self.register_buffer("{name}", None, persistent=False)`, or the whole mask for context_length) and assign it
    in forward, or remake the cache whenever its device differs from x.device."""


def _where(mixes) -> str:
    """The operations that meet a tensor left on the CPU, each said once with how often it does (fixes28: a rotary
    line multiplying by two tables read "mul at f.py:51 uses a (1, 5, 1, 2) tensor that stays on the CPU" three
    times over)."""
    counts: dict[str, int] = {}
    for mix in mixes:
        clause = f"{mix.op} at {mix.at} uses a {tuple(mix.shape)} tensor that stays on the CPU"
        counts[clause] = counts.get(clause, 0) + 1
    return "; ".join(clause + (f", {n} times" if n > 1 else "") for clause, n in list(counts.items())[:3])


def _and(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _suspects(inst, followed) -> str:
    """Where the tensor that stays behind comes from: plain attributes (set in __init__, or by forward as a cache),
    containers, factories without device=."""
    found = [f"plain attribute {a}" for a in inst.info.plain_tensors]
    cached = _cached_by_forward(inst, followed)
    if cached:  # the reason said once for them all (fixes28: it was repeated for each table of a rotary cache)
        found.append(f"plain attribute{'s' if len(cached) > 1 else ''} {_and(cached)}, set by forward ("
                     f"{'caches' if len(cached) > 1 else 'a cache'} made on the first input's device)")
    found += [f"{c} is a plain list/dict" for c in inst.info.containers]
    found += [f"{c.call} of shape {tuple(c.shape)} at {c.at} " + (f"with device={c.device}, not the input's device"
                                                                   if c.device else "without device=")
              for c in followed.created[:3]]
    return "; ".join(found) or "a tensor kept outside the module's buffers"
