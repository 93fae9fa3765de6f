from checks import check, failed, passed
from harness.subject import TargetFailure


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
            if not ctx.separate_widths or not _square_works(ctx, i):
                return failed(f"{loaded['name']}(...) failed for {cfg.describe()}: {e.message}", config=cfg)
            note = f"; it refuses d_in != d_out ({e.message[:160]}), so every check uses d_in = d_out"
            cfg = ctx.required_configs()[i]
        built.append(cfg.describe())
    spelt = ", ".join(f"{p}←{k}" for k, p in loaded["signature"]["accepts"].items())
    if loaded["signature"]["config_param"]:
        spelt += (", " if spelt else "") + f"{loaded['signature']['config_param']}←config object"
    return passed(f"built {loaded['name']} ({spelt or 'no arguments'}){note}", built=built)


def _square_works(ctx, i: int) -> bool:
    """Does the constructor accept the same configuration with d_in = d_out?  Then check with square widths."""
    ctx.square_only = True
    try:
        ctx.subject.build(ctx.required_configs()[i])
        return True
    except TargetFailure:
        ctx.square_only = False
        return False
