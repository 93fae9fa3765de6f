"""The detector of the output projection: after the heads are merged, one more linear layer lets them exchange
information.  It runs last, so its mark on the forward as a whole comes after the mask's."""
from __future__ import annotations

import re

from harness.engine.trace.detect_widths import full_width
from harness.engine.trace.registry import Findings, detector
from harness.engine.trace.vocabulary import ADDS, PROJECTION_UNAPPLIED

_SLICE = re.compile(r"\[[^\]]*\]")


@detector("heads-not-projected")
def heads_not_projected(f: Findings) -> None:
    """A complete forward with an attention of its own (not nn.MultiheadAttention) and no output projection: told
    at the student's `return` line, where the projection is to be applied (what is missing has no step of its
    own, but it has a place).  Where the module has an output projection (the proven reading's W_o) whose
    parameters the forward never touched, the mark names it, made and never applied: the fix is to apply it, not
    to add one (a student's nanoGPT layer with c_proj was told to add self.out_proj).  Not where every head is as
    wide as the whole layer (`detect_widths.full_width`): the heads side by side with no projection are that
    mistake, which detect_widths marks at its line."""
    labels = f.namer.labels
    if full_width(f):  # the heads each d wide, side by side: their missing projection is that mistake's part
        return  # (detect_widths: heads-full-width-unprojected)
    if f.complete and f.cfg.get("out_proj", True) and (f.named("softmax") or f.fused_sdpa) and not f.fused_mha and \
            not any(labels[i] == "output projection" for i in range(len(f.ops))):
        made = _unapplied(f)
        if made:
            f.mark_whole("heads-not-projected", {
                "text": (f"{made} (read as W_o) is made in __init__ but forward never applies it: the merged heads "
                         f"are returned without the output projection, so the heads cannot exchange information; "
                         f"{PROJECTION_UNAPPLIED}{made} to the merged heads where forward returns them"),
                "title": f"Output projection {made} made in __init__ and never applied: the concatenated heads are "
                         "returned as they are",
                "symptom": (f"Features found by different heads never mix: {made} is counted and saved, but gets no "
                            "gradient and is never trained, and the output differs from the reference."),
                "confirmed_by": "parameters-used:unused output projection"}, f.returned_at)
            return
        f.mark_whole("heads-not-projected", (
            "no output projection after the heads are merged: the heads cannot exchange information; add "
            "self.out_proj = nn.Linear(d_out, d_out) in __init__ and apply it to the merged heads where forward "
            "returns them"), f.returned_at)


def _unapplied(f: Findings) -> str | None:
    """`self.c_proj`: the module the proven reading takes W_o from (`f.cfg["roles"]`), where the forward used none
    of its parameters; None where there is no such reading, or the forward used it (a projection of another kind
    the namer did not call one)."""
    wo = (f.cfg.get("roles") or {}).get("wo")
    if not wo:
        return None
    weights = {_SLICE.sub("", piece.strip()).removesuffix(".T") for piece in wo.split("+")}
    used = {t["name"] for op in f.ops for t in op["in"] if isinstance(t, dict) and t.get("name")}
    if len(weights) != 1 or weights & used:
        return None
    (weight,) = weights
    module = weight.removesuffix(".weight")
    bias = (f.cfg.get("roles") or {}).get("bo", "")
    if bias and _SLICE.sub("", bias.strip()) in used:
        return None
    return f"self.{module}" if all(p.isidentifier() for p in module.split(".")) else None


@detector("out-proj-without-bias")
def out_proj_without_bias(f: Findings) -> None:
    """The output projection applied as a linear layer that adds no bias, where the proven reading of the parameters
    has no output bias (`f.cfg["roles"]`: W_o and no b_o) in a layer that is not grouped-query (whose projections
    have no biases by design), nor multi-query by its shapes alone (`shared_kv`: a student's trial, whose report
    passed out-proj-bias as "does not apply" while trace marked it): the lesson's out_proj = nn.Linear(d_out, d_out)
    has one.  The line to change is the one that built that projection (the child notes where the constructor made
    each parameter), not the call."""
    roles = f.cfg.get("roles") or {}
    wo = _SLICE.sub("", roles.get("wo", "").strip())
    if not wo or "bo" in roles or "+" in wo or f.cfg.get("kv_heads") or f.cfg.get("shared_kv") or \
            not f.cfg.get("out_proj", True):
        return
    for op in f.ops:
        if f.namer.labels[op["i"]] != "output projection" or op["op"] != "linear" or len(op["in"]) != 2:
            continue
        weight = next((t for t in op["in"] if t.get("name") == wo), None)
        made = (weight or {}).get("made") or {}
        if made.get("kind") == "parameter" and made.get("at") not in (None, "?"):
            module = wo.removesuffix(".weight")
            f.mark(op["i"], {"id": "out-proj-without-bias", "text": (
                f"the output projection {module} adds no bias: it was built without one at {made['at']}; the "
                "lesson's out_proj = nn.Linear(d_out, d_out) has a bias (bias=True is the default)"),
                "at": made["at"], "code": made.get("code", "")}, keep_earlier=True)
            return


@detector("residual-inside")
def residual_inside(f: Findings) -> None:
    """The forward's input added to what the output projection made (`return x + self.proj(y)`): the transformer
    block's residual connection inside the attention layer (a student's trial: "no known mistake matches", and a
    trace that listed the add as a step of no name and said nothing).  Marked at the add, where the sum is what the
    forward returns and the projections read the input as it came: a whole pre-norm or post-norm block (the input
    normalised before the projections, or the sum normalised after) is a block, which numbers alone judge."""
    projected = f.named("output projection")
    straight = any(t.get("name") == "x" for i in f.named("project") for t in f.ops[i]["in"] if isinstance(t, dict))
    if not projected or not straight:  # a pre-norm block (x + attn(norm(x))) projects the normalised input: a
        return  # block written as such, not this mistake (the zoo's prenorm_sublayer_rmsnorm)
    for op in f.ops[projected[-1] + 1:]:
        ins = [t for t in op["in"] if isinstance(t, dict)]
        used_after = any(t.get("src") == op["i"] for later in f.ops[op["i"] + 1:] for t in later["in"]
                         if isinstance(t, dict))  # a post-norm block, norm(x + attn(x)), returns no sum
        if op["op"] in ADDS and len(ins) == 2 and any(t.get("name") == "x" for t in ins) and not used_after and \
                any(f.namer.derives_from(t, ("output projection",)) for t in ins):
            f.mark(op["i"], {"id": "residual-inside", "text": (
                "the layer's input is added to the output projection's result (x + attn(x)): that is the "
                "transformer block's residual connection, not the attention layer's; return the projection's "
                "result alone and add x back in the block")})
            return
