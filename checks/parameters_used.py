"""parameters-used: every parameter receives a gradient: forward uses it, and not under no_grad or detach."""
import re
from dataclasses import replace

from checks import check, failed, passed
from checks.output_shape import output_shape
from harness.engine.mapping import as_it_is
from harness.wire import messages as m
from harness.wire.errors import CannotDrive, HarnessFailure, TargetFailure, WorkerDied

ROLE_WORDS = {"wq": "query", "wk": "key", "wv": "value", "wo": "output"}  # the projections, in the lesson's order
ROLE_NAMES = {"wq": "W_q", "wk": "W_k", "wv": "W_v", "wo": "W_o", "bq": "b_q", "bk": "b_k", "bv": "b_v", "bo": "b_o"}


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
    """The layer as mha-check builds it (the base configuration) and, where the constructor takes qkv_bias and the
    base has none, built with qkv_bias=True too: a Q/K/V bias forward never adds (`F.linear(x, self.q_proj.weight)`)
    exists only there, and passed unseen while reference-match failed at qkv_bias=True (a student's trial).  A
    parameter without a gradient in eval() is asked again in train(): one forward uses only while training (a
    training-time gain) is trained, and is not unused."""
    base = ctx.base
    configs = [base] + ([replace(base, qkv_bias=True)] if ctx.accepts("qkv_bias") and not base.qkv_bias else [])
    for cfg in configs:
        try:
            found = _unused(ctx, cfg)
        except (TargetFailure, CannotDrive):
            if cfg == base:
                raise
            continue  # the layer with Q/K/V biases cannot be built or driven: the checks that build it say so
        if found is not None:
            return _failure(ctx, cfg, *found)
    return passed("every parameter receives a gradient")


def _unused(ctx, cfg) -> tuple[list[str], bool, dict] | None:
    """(the parameters that get no gradient, in eval() and in train(); whether the output has no graph at all; the
    reading of the parameters as roles), or None where every parameter gets one."""
    got = _vjp(ctx, ctx.build(cfg), cfg, "eval")
    if not got.unused:
        return None
    try:
        trained = _vjp(ctx, ctx.build(cfg, fresh="parameters-used-train"), cfg, "train")
    except (TargetFailure, CannotDrive):  # a training step that raises trains nothing: eval's answer stands (the
        trained = None  # checks that run it in train() say why)
    unused = [n for n in got.unused if n in trained.unused] if trained and not trained.no_graph else got.unused
    if not unused:
        return None
    no_graph = got.no_graph and (trained is None or trained.no_graph)
    return unused, no_graph, {} if no_graph else _reading(ctx, None if cfg == ctx.base else cfg)


def _vjp(ctx, inst, cfg, mode: str):
    gy = ctx.rng("used", cfg).standard_normal((cfg.batch, cfg.n, cfg.d_out))
    # the layer as it is, its normalisations on, even where the other checks call it with them switched off
    # (harness.engine.mapping, 4.): a norm's parameters are the layer's as much as W_q is
    style = as_it_is(inst.info, inst.style)
    (got,) = inst.calls([m.Vjp(inst.handle, ctx.input(cfg, "used"), gy, mode, inst.layout, style)])
    return got


def _failure(ctx, cfg, unused: list[str], no_graph: bool, reading: dict):
    names = ", ".join(unused)
    built = "" if cfg == ctx.base else "built with qkv_bias=True, "
    roles = [] if no_graph else unused_roles(reading, unused)
    if not roles:
        return failed(f"{built}parameter(s) {names} receive no gradient: forward never uses them, or uses them under "
                      "torch.no_grad() / .detach()", observed=f"no gradient for {names}",
                      expected="a gradient for every parameter",
                      finding="unused parameter" if not no_graph else "no gradient")
    read = ", ".join(ROLE_NAMES[r] for r in roles)
    module = output_module(reading, unused) if roles_finding(roles) == OUT_PROJ_UNUSED else None
    said = (f"{built}{module} ({names}), which mha-check reads as the output projection {read}, receives no "
            f"gradient: forward never applies {module} to the merged heads, or applies it under torch.no_grad() / "
            ".detach()" if module else
            f"{built}parameter(s) {names}, which mha-check reads as {read}, receive no gradient: forward never uses "
            "them, or uses them under torch.no_grad() / .detach()")
    fix = (f"Apply {module} to the merged heads where forward returns them (the lesson's last step), with no "
           "torch.no_grad() or .detach() on the way to the output." if module else bias_fix(reading, roles))
    return failed(said, observed=f"no gradient for {names}", expected="a gradient for every parameter",
                  fix=fix or projections_fix(roles, names),
                  finding=roles_finding(roles), **({"own_fix": True} if fix and not module else {}))  # a bias's fix,
    # in the student's names: the diagnosis's fix too (query-bias-not-added; harness.engine.diagnosis)


PROJECTION_USE = {"wq": "the queries are x projected by W_q, scored against the keys (q @ kᵀ)",
                  "wk": "the keys are x projected by W_k, which the queries are scored against (q @ kᵀ)",
                  "wv": "the values are x projected by W_v, and the attention weights multiply them (weights @ v)"}


def projections_fix(roles: list[str], names: str) -> str:
    """The fix where a query, key or value projection gets no gradient: use it where the lesson does.  The check's
    own fix ends "or delete the ones you do not need", which a student's trial followed for W_v, forgotten in
    `probs @ k`, and the next report was worse; these are projections the layer needs."""
    uses = [PROJECTION_USE[r] for r in ("wq", "wk", "wv") if r in roles]
    if not uses:
        return ""
    return (f"Use {names} in forward as the lesson does, with no torch.no_grad() or .detach() on the way to the "
            f"output: {'; '.join(uses)}. "
            f"{'They are' if len(uses) > 1 else 'It is'} one of the lesson's four projections: deleting "
            f"{'them' if len(uses) > 1 else 'it'} would not make the layer right.")


BIAS_WORDS = {"bq": "query", "bk": "key", "bv": "value", "bo": "output"}
COMPUTES = {"bq": "the queries", "bk": "the keys", "bv": "the values", "bo": "the output"}


def bias_fix(reading: dict, roles: list[str]) -> str:
    """The fix of biases alone without a gradient (the projection applied by its weight only: `F.linear(x,
    self.q_proj.weight)`, `x @ self.W_q.weight.T`), in the student's names: the module applied whole, or the raw
    bias added; "" where a weight is among the roles (their own fixes say what to do)."""
    if not roles or not set(roles) <= set(BIAS_WORDS):
        return ""
    steps = []
    for role in roles:
        names = sorted(parameters_of(reading.get(role, "")))
        module = names[0].rsplit(".", 1)[0] if len(names) == 1 and names[0].endswith(".bias") else ""
        steps.append(f"self.{module}(x) (weight and bias) where forward computes {COMPUTES[role]}" if module and
                     all(p.isidentifier() for p in module.split(".")) else
                     f"{' + '.join(f'self.{n}' for n in names)} where forward computes {COMPUTES[role]}")
    return (f"Use {'; '.join(steps)}: F.linear(x, w) or x @ w.T with the weight alone leaves the bias out, so it is "
            "never trained" + (" and the outputs differ wherever it is not zero." if set(roles) - {"bk"} else
                               " (a key bias changes no output: the softmax ignores what it adds to a row of scores, "
                               "so bias=False for the keys is as right)."))


OUT_PROJ_UNUSED = "unused output projection"  # the finding of an output projection that gets no gradient


def roles_finding(roles: list[str]) -> str:
    """The finding, in the projections' words: which of the lesson's projections get no gradient ("unused query
    and key projections": weights-under-no-grad's; "unused output projection": a projection made and never
    applied).  The plain "unused parameter" was one signature for every unused parameter, so a c_proj made and
    never applied beside a second mistake was named weights-under-no-grad (issue 28)."""
    words = [ROLE_WORDS[r] for r in ROLE_WORDS if r in roles]
    if not words:  # biases alone: which ("unused query bias": a Q/K/V bias forward never adds)
        biases = [BIAS_WORDS[r] for r in BIAS_WORDS if r in roles]
        said = " and ".join([", ".join(biases[:-1]), biases[-1]] if len(biases) > 2 else biases)
        return f"unused {said} bias{'es' if len(biases) > 1 else ''}" if biases else "unused parameter"
    return f"unused {' and '.join(words)} projection{'s' if len(words) > 1 else ''}"


def _reading(ctx, cfg=None) -> dict[str, str]:
    """role -> the parameters it is read from, of the proven mapping; {} where there is none (the roles of the
    parameters are then unknown, and the finding stays the plain "unused parameter").  `cfg`: another configuration
    than the base (qkv_bias=True, whose b_q the base's reading has not), read with the proven mapping's layout."""
    try:
        mapping = ctx.mapping
        if cfg is None or not mapping.certain:
            return dict(mapping.description) if mapping.certain else {}
        inst = ctx.build(cfg)
        return dict(inst.layouts[inst.layout].roles) if inst.layout is not None else {}
    except (TargetFailure, CannotDrive, HarnessFailure, WorkerDied):
        return {}


_SLICE = re.compile(r"\[[^\]]*\]")


def parameters_of(reading: str) -> set[str]:
    """The parameter names a role's reading is made of: `c_attn.weight.T[0:8]` -> {c_attn.weight};
    `heads.0.key.weight + heads.1.key.weight` -> both."""
    out = set()
    for piece in reading.split("+"):
        name = _SLICE.sub("", piece.strip())
        out.add(name[:-2] if name.endswith(".T") else name)
    return out


def unused_roles(description: dict[str, str], unused: list[str]) -> list[str]:
    """The roles (wq, ..., bo) every parameter of whose reading got no gradient, where those parameters are all the
    unused ones; [] where an unused parameter is in no role (an extra projection), or a role is only partly
    unused, or the parameters have no reading: their roles are then not known."""
    unused = set(unused)
    roles = [r for r, reading in description.items() if r in ROLE_NAMES and parameters_of(reading) <= unused]
    covered = set().union(*(parameters_of(description[r]) for r in roles)) if roles else set()
    return sorted(roles, key=list(ROLE_NAMES).index) if roles and covered == unused else []


def output_module(description: dict[str, str], unused: list[str]) -> str:
    """`self.c_proj`: the output projection's attribute, where W_o is one module's weight (and b_o its bias);
    else the parameters' names as they are (`self.W_o`, a raw parameter)."""
    weight = sorted(parameters_of(description.get("wo", "")))
    if len(weight) != 1:
        return ", ".join(f"self.{n}" for n in unused)
    module = weight[0].rsplit(".", 1)[0] if weight[0].endswith(".weight") else weight[0]
    return f"self.{module}" if all(p.isidentifier() for p in module.split(".")) else f"self.{weight[0]}"
