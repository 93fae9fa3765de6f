from dataclasses import replace

from checks import check, failed, passed
from harness.sandbox.subject import TargetFailure


@check(
    id="construct",
    claim="the target imports and builds a torch.nn.Module for valid configurations",
    explanation="""Every other check needs a module to test. mha-check imports your file and calls your class (or
    factory) with the width, number of heads and context length spelt the way your constructor names them.""",
    fix="""Make the file import without errors and the constructor accept the width, the number of heads and the
    context length (any usual names work); for anything unusual pass --arg NAME=VALUE.""",
    needs=(),
    example="""built for the required configs: d = 6, H = 2, context_length = 7 and d = 12, H = 3, context_length = 5
      (with separate widths d_in = 5 and 7, d_out = 6 and 12)
    the names are matched to your constructor: d / d_model / embed_dim / n_embd ..., nheads / num_heads /
      n_head ..., context_length / block_size / max_len ..., or a config object with those fields
    pass: both calls return an nn.Module
    fail: the file does not import, or the constructor raises, or it needs an argument with an unknown name:
      __init__(self, d, heads, ctx, rope_base) -> 'mha-check has no value for required parameter(s)
      rope_base', fixed with --arg rope_base=10000""",
)
def run(ctx):
    try:
        loaded = ctx.subject.load()
    except TargetFailure as e:
        return failed(f"could not load the target: {e.message}")
    built, note = [], ""
    for i in range(len(ctx.required_configs())):
        cfg = ctx.required_configs()[i]
        try:
            ctx.subject.build(cfg)
        except TargetFailure as e:
            accepted = _builds_other_widths(ctx, cfg) if ctx.separate_widths else None
            if not ctx.separate_widths or accepted or not _square_works(ctx, i):
                hint = (f" (yet it builds d_in={accepted.d_in}, d_out={accepted.d_out}: is d_in used where d_out is "
                        "meant?)" if accepted else "")
                return failed(f"{loaded['name']}(...) failed for {cfg.describe()}: {e.message}{hint}", config=cfg,
                              diagnosis="builds d_in = d_out + heads instead" if accepted else "refuses valid widths")
            note = f"; it refuses d_in != d_out ({e.message[:160]}), so every check uses d_in = d_out"
            cfg = ctx.required_configs()[i]
        built.append(cfg.describe())
    spelt = ", ".join(f"{p}←{k}" for k, p in loaded["signature"]["accepts"].items())
    if loaded["signature"]["config_param"]:
        spelt += (", " if spelt else "") + f"{loaded['signature']['config_param']}←config object"
    return passed(f"built {loaded['name']} ({spelt or 'no arguments'}){note}", built=built)


def _builds_other_widths(ctx, cfg):
    """A constructor that refuses d_in != d_out refuses it for every d_in.  One that builds d_in = d_out + heads (a
    multiple of the head count) but not the required d_in is not square-only: it takes the width from d_in where
    d_out is meant, and its refusal was a divisibility error on the wrong width.  Returns that configuration."""
    other = replace(cfg, d_in=cfg.d_out + cfg.heads)
    try:
        ctx.subject.build(other)
    except TargetFailure:
        return None
    return other


def _square_works(ctx, i: int) -> bool:
    """Does the constructor accept the same configuration with d_in = d_out?  Then check with square widths."""
    ctx.square_only = True
    try:
        ctx.subject.build(ctx.required_configs()[i])
        return True
    except TargetFailure:
        ctx.square_only = False
        return False
