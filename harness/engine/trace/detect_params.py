"""The detectors of the layer's weights: a layer kept in a plain list, a layer forward never uses, and parameters
made inside forward: `nn.Linear(d, d)` (or `torch.randn(d, d)` used as a weight) written in forward instead of
__init__ builds new random weights at every call.  The recorder sees the layer's
construction itself: its random initialisation (`kaiming_uniform_`, `uniform_`...) runs at the student's line in
forward, and the tensor it fills is then used as a weight (linear's weight, a matmul's operand).  A random tensor
that is compared or multiplied first (a hand-written dropout mask, `torch.rand(...) < p`) is not a weight.  The
child notes, for each weight a recorded operation uses, where the constructor made it and whether the module
registers it (`made`, kind "unregistered": a layer of a plain list or dict), and where it made the parameters the
forward never used (`f.cfg["untouched"]`)."""
from __future__ import annotations

from harness.engine.trace.registry import Findings, detector
from harness.engine.trace.vocabulary import DIVIDES, MULTIPLIES

INITS = {"kaiming_uniform_", "kaiming_normal_", "xavier_uniform_", "xavier_normal_", "uniform_", "normal_",
         "trunc_normal_", "orthogonal_"}  # what nn.Linear / nn.init fill new weights with
DRAWS = {"randn", "rand"}  # a tensor of weights drawn in forward
WEIGHT_USERS = {"linear", "matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "einsum"}
SCALINGS = DIVIDES | MULTIPLIES  # with a plain number: the draw's scale (randn(d, d) / d ** 0.5, * 0.02)
SAME_TENSOR = {"t", "T", "mT", "transpose", "to", "requires_grad_", "float", "double", "detach", "type_as",
               "contiguous"}  # the weight itself, seen another way


def _used_as_weight(f: Findings, c: int) -> bool:
    """Whether what operation `c` made reaches a linear layer or a matrix product as it is (only transposed, cast,
    moved, or scaled by a plain number on the way: `nn.Parameter(torch.randn(d, d) / d ** 0.5)`)."""
    reach = {c}
    for op in f.ops[c + 1:]:
        if not any(t.get("src") in reach for t in op["in"]):
            continue
        if op["op"] in WEIGHT_USERS:
            return True
        if op["op"] in SAME_TENSOR or op["op"] in SCALINGS and len(op["in"]) == 1:  # one tensor: times a number
            reach.add(op["i"])
    return False


@detector("layer-made-in-forward")
def layer_made_in_forward(f: Findings) -> None:
    """A weight drawn at random during forward (a layer constructed there, or randn weights) and then used: every
    call computes with new weights, which are no registered parameter of the module."""
    for op in f.ops:
        made = op["op"] in INITS and op["inplace"] and op["in"] and (op.get("out") or {}).get("shape") or \
            op["op"] in DRAWS and not op["in"] and len((op.get("out") or {}).get("shape") or ()) == 2
        if made and _used_as_weight(f, op["i"]):
            f.mark(op["i"], {"id": "layer-made-in-forward", "text": (
                "new random weights are made here, inside forward (a layer constructed, or weights drawn, at every "
                "call): the output changes from call to call, and these weights are no registered parameter, so "
                "they never train and do not move with .to(device); create the layer once in __init__ (self.proj "
                "= nn.Linear(...)) and call it in forward"), **(DRAWN if op["op"] in DRAWS else {})},
                keep_earlier=True)
            return


DRAWN = {  # the mistake as this line tells it: weights drawn (nn.Parameter(torch.randn(...))), not an nn.Linear,
    # whose matrix product with CPU weights the meta device lets through: mask-buffer finds "weights stay on the
    # CPU", not the catalogue's "a tensor stays on the CPU" (the mark's own title says which variant it is)
    "title": "Weights drawn inside forward (torch.randn, nn.Parameter(...)): new random weights at every call, never "
             "registered",
    "symptom": ("Every call draws new random weights: the output changes from call to call even in eval() mode on "
                "the same input, the weights are none of the module's parameters (the count is short), so the "
                "optimizer never trains them, and .to(device) leaves them on the CPU."),
}


@detector("layer-in-plain-list")
def layer_in_plain_list(f: Findings) -> None:
    """A weight the forward computes with that belongs to a layer of a plain Python list or dict (`self.projections
    = [nn.Linear(d, d) for _ in range(3)]`): nn.Module never registers it, so model.parameters(), .to(device) and the
    state_dict miss it.  Marked once, at the first such use, the line to change being the one that built the
    container."""
    for op in f.ops:
        made = next((t["made"] for t in op["in"] if (t.get("made") or {}).get("kind") == "unregistered"
                     and t["made"].get("at") not in (None, "?")), None)
        if made:
            container = made.get("path", "").split("[", 1)[0]
            f.mark(op["i"], {"id": "layer-in-plain-list", "text": (
                f"this weight belongs to a layer kept in the plain Python container self.{container} (built at "
                f"{made['at']}): nn.Module never registers it, so model.parameters() misses it (an optimiser never "
                "trains it), .to(device) leaves it behind and the state_dict does not save it; keep the layers as "
                "attributes or in an nn.ModuleList / nn.ModuleDict"), "at": made["at"], "code": made.get("code", "")},
                keep_earlier=True)
            return


@detector("layer-never-used")
def layer_never_used(f: Findings) -> None:
    """A layer made in __init__ whose parameters the forward, run to the end in eval and in training mode, never
    touched: counted, saved and moved, never trained.  Told at the line that built it.  A layer the proven reading
    takes a role from (an output projection made and never applied) is heads-not-projected's to tell, and one of
    the query, key or value projections left out is another mistake than a layer too many: neither is marked.  Nor
    is a layer its owner's class reads outside __init__ (`referenced`, harness.child.references): a branch these
    inputs never took, said in a note."""
    used = _names_used(f.ops) | _names_used(((f.cfg.get("training") or {}).get("ops")) or [])
    if not f.complete or not used:  # a forward whose weights the trace never saw read (a TorchScript module runs
        # its operations where the recorder cannot see them) says nothing of which ones it used
        return
    roles = " ".join((f.cfg.get("roles") or {}).values())
    params = f.cfg.get("params") or []
    for made in f.cfg.get("untouched") or []:
        layer = made.get("path", "").rpartition(".")[0]
        own = [p for p in params if p.rpartition(".")[0] == layer]
        if not layer or not own or layer in roles or any(p in used for p in own) or made.get("at") in (None, "?"):
            continue
        if made.get("referenced"):  # its class reads it outside __init__: a branch these inputs never took, not dead
            # code (Compressive Transformer's ConvCompress, run once memories overflow: "delete it" would break it)
            read = made["referenced"]
            noted = (f"self.{layer} got no use in this forward, though {read.get('at', 'your code')} reads it "
                     f"({read.get('code', '').strip()}): a branch these inputs never took; its parameters get no "
                     "gradient from this layer's output (parameters-used)")
            if noted not in f.notes:  # once per layer, not per parameter of it
                f.notes.append(noted)
            continue
        f.mark_whole("layer-never-used", (
            f"self.{layer} is made here in __init__, but forward never uses it: its {len(own)} parameter tensor"
            f"{'s' if len(own) > 1 else ''} ({', '.join(own)}) get no gradient, so they are counted and saved but "
            "never trained; delete it, or use it where it was meant to be used"),
            {"at": made["at"], "code": made.get("code", "")})
        return


def _names_used(ops: list[dict]) -> set[str]:
    """The module's tensors (by name) that these recorded operations read."""
    return {t["name"] for op in ops for t in op["in"] if isinstance(t, dict) and t.get("name")}


ROLE_WORDS = {"q": ("query", "queries"), "k": ("key", "keys"), "v": ("value", "values")}
BIAS_LEFT_OUT = tuple(f"{word}-bias-left-out" for word, _ in ROLE_WORDS.values())  # the marks, which the diagnosis
# takes from the forward recorded with the biases (harness.engine.diagnosis)


@detector(*BIAS_LEFT_OUT)
def bias_left_out(f: Findings) -> None:
    """A query, key or value projection applied by its weight alone (`F.linear(x, self.W_value.weight)`, `x @
    self.q_proj.weight.T`) while its module has a bias that forward, in eval and in training mode, never reads: the
    bias is made, counted and saved, never added nor trained.  Marked at the operation that reads the weight, once
    per projection.  Only a build with the biases shows it (the diagnosis records one with qkv_bias=True where
    parameters-used finds a Q/K/V bias without a gradient); a fused projection's bias is one tensor for all three,
    and a weight whose module has no bias of that name (a Linear built with bias=False) is no mistake."""
    used = _names_used(f.ops) | _names_used(((f.cfg.get("training") or {}).get("ops")) or [])
    if not f.complete or not used:
        return
    roles, params = f.cfg.get("roles") or {}, set(f.cfg.get("params") or [])
    for role, (word, words) in ROLE_WORDS.items():
        weight = roles.get(f"w{role}", "")
        module, _, leaf = weight.rpartition(".")
        bias = f"{module}.bias"
        if leaf != "weight" or not module or bias not in params or bias in used:
            continue  # a slice of a fused weight, a weight without a bias, or a bias forward adds somewhere
        reads = next((op for op in f.ops if any(isinstance(t, dict) and t.get("name") == weight for t in op["in"])),
                     None)
        if reads is None:
            continue
        f.mark(reads["i"], {"id": f"{word}-bias-left-out", "text": (
            f"the {word} projection is applied by its weight self.{weight} alone: its bias self.{bias} is never "
            f"added, so the {words} lack b_{role} and b_{role} is never trained; apply the layer whole, "
            f"self.{module}(x), or add the bias")}, keep_earlier=True)
