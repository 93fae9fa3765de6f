"""head-invariance: the parameter count is the same for every number of heads that divides the width.

Grouped-query attention defines it at a fixed group size (query heads per key/value head): W_k and W_v have
kv_heads · dh = d_out / group rows, the same for any number of heads; so a layer that takes a number of key/value
heads is built with kv_heads = heads and, separately, with groups of 2 (H = 2, 4, 6 with 1, 2, 3 key/value heads).
A layer with one shared key/value head and no parameter for it (multi-query) has K/V of width d_out / H by design:
its count changes with the heads, and param-count checks its formula instead.

A class that refuses only the odd head widths (H=4 for d_out=12: width 3) refuses them by design, as rotary embeddings
must: those are left out and the even widths compared, never a failure for what mha-check chose to build.  The
parameters of a normalisation the layer keeps inside itself (harness.child.norms) are left out of every count, as
param-count leaves them out: a query/key norm over the head width (RMSNorm(d_out / H)) changes the total with the
heads, and is no mistake of the attention.  So are a frozen parameter's that no reading takes (a constant, as a
buffer would be; param-count): a RoPE frequency table of dh / 2 elements kept as nn.Parameter(..., requires_grad=False)
changes the total with the heads, and nothing learns it."""
from checks import Status, check, does_not_apply, failed, passed
from checks.construct import construct
from harness.engine.mapping import describe_norms, frozen_constants, norm_parameters, unread_beside_norms
from harness.wire.config import Config
from harness.wire.errors import TargetFailure


SHRINK_FIX = """The count falls as heads are added: some of the layer's parameters are sized by one head's width
    alone, or shared by every head (the same head module repeated, `[head] * H`, which nn.ModuleList holds once).
    Give every head its own queries, keys and values: one projection of width d_out each, split into the heads, or
    a new head built for each (`nn.ModuleList(Head(...) for _ in range(H))`)."""  # the check's fix speaks of
# full-width heads, which a count that shrinks does not have (a student's shared heads were told to narrow them)


@check(
    id="head-invariance",
    claim="the parameter count is the same for every number of heads that divides the width",
    explanation="""Heads split the width instead of multiplying it: H heads of width d_out/H cost exactly what one
    head of width d_out costs. "More heads means more parameters" is the misconception this catches.""",
    fix="""Give the heads d_out / H features each (one projection of width d_out, viewed as (B, n, H, d_out/H)),
    not one full-width projection per head.""",
    example="""d_out = 12 (d_in = 12, or 24 with separate widths), built with H = 1, 2, 3, 4, 6 (dh = 12, 6, 4, 3, 2)
    pass: the same count every time, 3·12·12 + 12² + 12 = 588 (1,020 with d_in = 24)
    fail: every head with its own full-width 12 -> 12 Q, K, V and out = Linear(12·H, 12):
      588, 1164, 1740, 2316, 3468 parameters for H = 1, 2, 3, 4, 6""",
    needs=(construct,),
)
def head_invariance(ctx):
    if not ctx.grouped and any(layout.kv_width for layout in ctx.built(ctx.base).layouts):
        return does_not_apply("does not apply: your layer has one shared key/value head (multi-query attention) "
                              "with no parameter for it, so its W_k and W_v have d_out / H rows and its count changes "
                              "with the heads by design; param-count checks d_in·d_out + 2·d_in·(d_out / H) + d_out² + "
                              "biases instead")
    plain = _same_count(ctx, {heads: None for heads in (1, 2, 3, 4, 6)})
    if plain.status != Status.PASS or not ctx.grouped:
        return plain
    groups = _same_count(ctx, {2: 1, 4: 2, 6: 3}, " in groups of 2 (1, 2, 3 key/value heads)")
    if groups.status != Status.PASS:
        return groups
    return passed(f"{plain.message}; {groups.message}", form="grouped")


def _same_count(ctx, kv_of: dict, grouping: str = ""):
    """Build d_out = 12 with each number of heads (and key/value heads `kv_of[heads]`) and compare the counts.  A
    class that refuses narrow heads by design (Context.head_width = W, e.g. 8) is built with d_out = 6·W (heads of
    width 6·W, 3·W, 2·W, 1.5·W and W), and judged on the widths that are multiples of W."""
    sep, wide = ctx.separate_widths, getattr(ctx, "head_width", None)
    d_out, step = (6 * wide, wide) if wide else (12, 2)
    counts, failures = {}, {}
    modules = {heads: ctx.built(Config(d_in=2 * d_out if sep else d_out, d_out=d_out, heads=heads, context_length=5,
                                       batch=2, n=3, kv_heads=kv)) for heads, kv in kv_of.items()}
    ctx.build_ahead(list(modules.values()))  # one round trip
    norms, constants = "", ""
    unread: dict[int, list[tuple[str, int]]] = {}  # parameters no reading takes for a weight or a bias, per build
    for heads, inst in modules.items():
        try:
            held = norm_parameters(inst.info)  # a normalisation's parameters are not the attention's (param-count)
            frozen = frozen_constants(inst.info)  # nor is a constant kept as a frozen parameter (param-count)
            counts[heads] = inst.info.param_count - sum(size for _, size in held + frozen)
            unread[heads] = [p for p in unread_beside_norms(inst.info) if p not in frozen]
            norms = norms or (f"({', '.join(name for name, _ in held)}) of {describe_norms(inst.info)}, which your "
                              f"layer keeps inside itself and which {'is' if len(inst.info.norms) == 1 else 'are'} no "
                              "part of the attention" if inst.info.norms else "")
            constants = constants or ", ".join(name for name, _ in frozen)
        except TargetFailure as e:
            counts[heads] = None
            failures[heads] = e.message
    built = {h: c for h, c in counts.items() if c is not None}
    table = ", ".join(f"H={h}: {c if c is not None else 'failed to build'}" for h, c in counts.items())
    refused = {h: msg for h, msg in failures.items() if (d_out // h) % step == 0}  # odd head widths aside
    if refused:
        h, msg = next(iter(refused.items()))
        return failed(f"could not build with {h} heads{grouping} for d_out={d_out}: {msg}", observed=table)
    note = ""
    if failures and not wide:  # refused only where the head width is odd: rotary embeddings must, and the lesson's
        # configurations keep head widths even (docs/checks.md), so this is judged on the even ones
        h, msg = next(iter(failures.items()))
        note = (f"; it refuses heads of odd width ({', '.join(f'H={h}' for h in failures)}, width {12 // h}: "
                f"{msg.split(' (at ')[0][:160]}), as rotary embeddings must, so only even head widths are compared")
    elif failures:  # refused where the head width is not a multiple of the one construct found it builds
        h, msg = next(iter(failures.items()))
        note = (f"; it refuses heads whose width is not a multiple of {wide} ({', '.join(f'H={h}' for h in failures)}"
                f", width {d_out // h}: {msg.split(' (at ')[0][:160]}), so only multiples of {wide} are compared")
    if norms:
        note += f"; not counted: the parameters {norms}"
    if constants:
        note += (f"; not counted: {constants} (requires_grad=False, a constant of the layer, not a weight it learns), "
                 "as a buffer would not be")
    if len(set(built.values())) > 1:
        first = next(iter(built))
        fewest, most = built[min(built)], built[max(built)]
        # full-width heads grow with H; a count that shrinks (one key/value head of width d_out // H, PaLM's
        # multi-query layers) is another pattern, which no known mistake has
        finding = "count grows with heads" if most > fewest else "count shrinks with heads"
        only = _only_through_unread(built, unread) if _proven(ctx) else ""  # unproven, a reading may take one
        # head's projections and leave the others "unread" (full-width heads): then the heads are what changes
        if only:
            return failed(f"parameter count changes with the number of heads{grouping} (d_out={d_out}): {table}{note}; "
                          f"it changes only through {only}, which no reading takes for W_q, W_k, W_v, W_o or a bias "
                          "(without it the count is the same for every number of heads)", observed=table,
                          expected=f"the same count for all, {built[first]} as with "
                          f"{'one head' if first == 1 else f'{first} heads'}",
                          finding="count changes through unread parameters",
                          fix=f"{only} is sized by the number of heads (one head's width, shared by every head, or "
                              "one entry per head), a learned parameter the lesson's layer does not have (a learned "
                              "per-dimension scale, say, where the lesson divides by sqrt(dh)): keep it outside the "
                              "attention layer, make it a constant "
                              "(a buffer, or requires_grad=False), or follow the lesson's layer exactly.")
        return failed(f"parameter count changes with the number of heads{grouping} (d_out={d_out}): {table}{note}",
                      observed=table, expected=f"the same count for all, {built[first]} as with "
                      f"{'one head' if first == 1 else f'{first} heads'}", finding=finding,
                      **({"fix": " ".join(SHRINK_FIX.split())} if most < fewest else {}))
    heads = [str(h) for h in built]
    first = next(iter(built))
    return passed(f"{built[first]} parameters for {', '.join(heads[:-1])} and {heads[-1]} heads{grouping} "
                  f"(d_out={d_out}){note}")


def _only_through_unread(built: dict, unread: dict) -> str:
    """The names of the parameters no reading takes (a learned per-dimension scale of one head's width: TimesFM 2.5's
    per_dim_scale) when the count without them is the same for every number of heads, else "": the change is theirs
    alone, and the heads' queries, keys and values are not what changes."""
    rest = {h: count - sum(size for _, size in unread.get(h, [])) for h, count in built.items()}
    names = sorted({name for h in built for name, _ in unread.get(h, [])})
    return ", ".join(names) if names and len(set(rest.values())) == 1 else ""


def _proven(ctx) -> bool:
    """The lesson's layer (or a known mistake) reproduces the module's output under one reading of its parameters:
    what no reading takes is then no projection of the heads."""
    try:
        return bool(ctx.mapping.certain)
    except TargetFailure:
        return False
