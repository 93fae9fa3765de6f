"""divisibility (a lesson rule): a width not divisible by the number of heads is refused at construction."""
from checks import check, failed, passed
from checks.construct import construct, indivisible
from harness.wire import raised
from harness.wire.errors import CannotDrive, HarnessFailure, TargetFailure, WorkerDied


def own_fix(signature) -> str:
    """The general fix in the constructor's own names (`if d_model % n_head: ...`): the lesson's `d_out` and
    `num_heads`, pasted into a class that takes `d_model` and `n_head`, raised NameError in a student's trial.  In
    words when the constructor's names for the width and the heads are not both known."""
    width = signature.accepts.get("d_out") or signature.accepts.get("width")
    heads = signature.accepts.get("heads")
    if not (width and heads and width.isidentifier() and heads.isidentifier()):
        return ("At the top of __init__, raise a ValueError (or assert) when the width is not divisible by the number "
                "of heads.")
    if signature.config_param:
        width, heads = f"{signature.config_param}.{width}", f"{signature.config_param}.{heads}"
    return (f'At the top of __init__: `if {width} % {heads}: raise ValueError(f"{width}={{{width}}} is not '
            f'divisible by {heads}={{{heads}}}")` (an assert also works).')


def what_it_did(ctx, inst) -> str:
    """What the module built for a width its heads do not divide then does, from its own answers: its forward
    raised (the student's error and line), or its parameters are H·(d_out // H) wide (the heads cover only that many
    of the d_out features), or, when neither shows, only that its forward ran."""
    cfg = inst.cfg
    d_out, heads, width = cfg.d_out, cfg.heads, (cfg.d_out // cfg.heads) * cfg.heads
    y = None
    try:
        proof = ctx.mapping  # the proven way to call forward (the proof ran on a width the heads divide)
        inst.style = proof.style if proof.style is not None else 0
        y = inst.forward(ctx.input(cfg, "divisibility"))
    except TargetFailure as e:
        said = raised.parse(e.message) if e.stage == "forward" else None
        if said is not None:
            return (f"its forward then raised {said.kind}" + (f" at {said.at}" if said.at else "") +
                    f": {said.text[:160]}, far from the cause")
    except (CannotDrive, HarnessFailure, WorkerDied):
        pass
    if any(width in p.shape for p in inst.info.params):
        return f"heads of width {d_out // heads} cover only {width} of the {d_out} features"
    if y is not None:
        return f"its forward ran, though {d_out} features do not split into {heads} heads of equal width"
    return f"{d_out} features do not split into {heads} heads of equal width"


@check(
    id="divisibility",
    claim="a width not divisible by the number of heads is refused at construction with an error",
    explanation="""Each head gets d_out / H features. When H does not divide d_out, `d_out // H` silently drops
    features (or the reshape fails later, far from the cause). The lesson: choose d_out divisible by H and check it
    when building the config.""",
    fix="""At the top of __init__: `if d_out % num_heads: raise ValueError(f"d_out={d_out} is not divisible by
    num_heads={num_heads}")` (an assert also works).""",
    example="""d_out = 8, H = 3: 8 % 3 = 2, and 8 // 3 = 2: three heads of width 2 cover only 6 of the 8 features
    d_out = 10, H = 4: 10 // 4 = 2: four heads of width 2 cover only 8 of the 10 features
    pass: both constructors raise (ValueError, AssertionError, ...)
    fail: a module is built, e.g. with q, k, v = Linear(8, 6) and out = Linear(6, 8): 200 parameters,
      y (2, 3, 8) looks normal and 2 features are silently dropped
    (construct checks that the valid d = 6, H = 2 and d = 12, H = 3 still build)""",
    needs=(construct,),
    kind="rule",
)
def divisibility(ctx):
    configs = indivisible(ctx)
    for cfg in configs:
        d_out, heads = cfg.d_out, cfg.heads
        try:
            inst = ctx.built(cfg)
            inst.info  # noqa: B018 - built now: the constructor must refuse this configuration
        except TargetFailure:
            continue
        return failed(
            f"built a module for d_out={d_out} with {heads} heads instead of refusing it; {what_it_did(ctx, inst)}",
            config=cfg, observed=f"constructed ({inst.info.param_count} parameters)",
            expected="an exception from the constructor", finding="no divisibility check",
            fix=own_fix(ctx.signature), own_fix=True)  # (the diagnosis's fix too)
    first, second = configs
    return passed(f"refused d_out={first.d_out} with {first.heads} heads and d_out={second.d_out} with "
                  f"{second.heads} heads")

