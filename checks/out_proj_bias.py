"""out-proj-bias (a lesson rule): the output projection has a bias, as the lesson's nn.Linear(d_out, d_out)."""
import re

from checks import cannot_tell, check, does_not_apply, failed, passed
from checks.construct import construct
from harness.engine.mapping import map_help, unread_beside_norms


@check(
    id="out-proj-bias",
    claim="the output projection has a bias, as the lesson's out_proj = nn.Linear(d_out, d_out)",
    explanation="""The lesson's layer ends with nn.Linear(d_out, d_out), which has a bias of width d_out: its
    parameter count 3·d_in·d_out + d_out² + d_out has that d_out in it. A projection built with bias=False is not
    wrong mathematics (many modern models drop it), but it is not the lesson's layer.""",
    fix="""`self.out_proj = nn.Linear(d_out, d_out)` (bias=True is the default).""",
    needs=(construct,),
    kind="rule",
    example="""d = 8: out_proj = nn.Linear(8, 8) has a weight (8 × 8) and a bias (8): 72 parameters
    nn.Linear(8, 8, bias=False): 64, and the whole layer 256 instead of 264""",
)
def out_proj_bias(ctx):
    """A multi-head layer proven to have no output projection at all (read without one, W_o the identity, it computes
    its own output: harness.engine.mapping) has no output bias either, a fact, not a guess: the rule fails, as part
    of the missing projection param-count names.  Unproven readings without W_o are no evidence: cannot tell."""
    inst = ctx.built(ctx.base)
    if inst.layouts and all("wo" not in layout.roles for layout in inst.layouts) and ctx.without_out_proj:
        return failed("your layer has no output projection, so no output bias either: the lesson's layer ends with "
                      "nn.Linear(d_out, d_out), which has one", observed="no output projection",
                      expected="an output projection with a bias of width d_out", finding="no output projection",
                      fix="Add `self.out_proj = nn.Linear(d_out, d_out)` (it has a bias) and apply it to the merged "
                          "heads.")
    if not inst.layouts or all("wo" not in layout.roles for layout in inst.layouts):  # read without W_o, unproven
        return cannot_tell("mha-check could not find your output projection among your parameters "
                           f"({inst.info.layout_problem})", help=map_help(ctx, inst.info.layout_problem))
    has = {"bo" in layout.roles for layout in inst.layouts}
    if has == {True}:
        return passed("the output projection has a bias")
    if has == {False} and (ctx.grouped or any(layout.kv_width for layout in inst.layouts)):
        return does_not_apply("does not apply: your layer is grouped-query (or multi-query) attention, the Llama "
                              "family's layer, whose projections have no biases by design; the rule is the lesson's "
                              "multi-head layer's")
    if has == {False}:
        name = inst.layouts[0].roles.get("wo", "the output projection")
        unread = _unread_bias_sized(inst.info, ctx.base.d_out)
        if unread:
            return cannot_tell(
                f"mha-check read no bias for {name}, but your layer keeps {', '.join(unread)} ({ctx.base.d_out} "
                "values, a bias's size), which no reading takes: it may be the output projection's bias",
                help=f"say so if it is: --map bo={unread[0]}")
        said = (name.removesuffix(".weight") if re.fullmatch(r"[\w.]+", name) else
                f"your output projection (read as {name})")  # the layer, not its weight ("out_proj.weight has no
        # bias", a student's trial); per-head pieces, `Wo[0].T + Wo[1].T`, said alone read as no projection
        return failed(f"{said} has no bias: the lesson's output projection nn.Linear(d_out, d_out) has one",
                      observed="no output bias", expected="a bias of width d_out", finding="no output bias",
                      fix=_bias_fix(name), own_fix=True)  # (the diagnosis's fix too: harness.engine.diagnosis)
    return cannot_tell("the readings of your parameters disagree on whether the output projection has a bias",
                       help=map_help(ctx))


def _bias_fix(reading: str) -> str:
    """The fix in the student's own names (issue 28 item 6): a Linear module's weight is its module's
    (`self.o = nn.Linear(dim, dim, bias=False)`: drop the bias=False); any other reading (a raw matrix, per-head
    pieces) gets a bias of its own, added after it, in words.  The lesson's `self.out_proj` may be no name their
    forward uses."""
    linear = re.fullmatch(r"([A-Za-z_][\w.]*)\.weight(\.T)?", reading)
    if linear:
        attribute = re.sub(r"\.(\d+)(?=\.|$)", r"[\1]", linear.group(1))  # to_out.0: a Sequential's first module
        return (f"Build `self.{attribute}` as an nn.Linear with its bias: leave out `bias=False` (bias=True is "
                "the default).")
    matrices = ", ".join(dict.fromkeys(re.findall(r"[A-Za-z_][\w.]*", reading.replace(".T", ""))))
    return (f"Give your output projection ({matrices}) a bias of width d_out, added after it: for example "
            "`self.out_bias = nn.Parameter(torch.zeros(d_out))` and `... + self.out_bias` (or build it as "
            "`nn.Linear(d_out, d_out)`, which has one).")


def _unread_bias_sized(info, d_out: int) -> list[str]:
    """Parameters of d_out values that no reading takes and no normalisation owns: a --map that named a raw W_o
    and not its bias leaves the bias so (whether the projection has one is then unknown, not a broken rule)."""
    return [name for name, size in unread_beside_norms(info) if size == d_out]
