"""Which of the student's parameters are W_q, W_k, W_v, W_o (and biases), and how forward is called: proved, not
guessed.

The child offers candidate readings of the parameters (layouts: named Linear layers, fused q/k/v read as [Q; K; V]
or per head, raw matrices in either orientation, per-head modules...) and candidate ways to call forward (x alone,
or with a causal mask in one of the usual conventions).  On the base configuration, with the module's own weights,
this module looks for the pair under which

1. the lesson's reference reproduces the module's own output: the mapping is *reproduced*, the module computes the
   right function under it; or else
2. exactly one known mistake's numeric variant reproduces it: the mapping is proven *and* the mistake identified; or
   else
3. the layout is the only possible reading of the parameters (named nn.Linear layers, nn.MultiheadAttention or the
   user's --map, covering every parameter) and forward takes only x: certain *by structure*.

Otherwise the mapping is unknown: the weight-dependent checks then say *cannot tell* (with what was tried and the
--map option), never fail the student on a guess.  Likewise a mask convention is used only once it reproduced.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import mutants
from harness.engine.compare import close, same
from harness.wire.errors import TargetFailure
from reference import numpy_ref, variants

MAP_HELP = ("say which parameters play the roles: --map q=NAME --map k=NAME --map v=NAME --map o=NAME (a module or "
            "parameter name; NAME.T for a matrix used as x @ W; --map qkv=NAME for a fused projection)")
MAPPED_HELP = ("the parameters named with --map were tried (a fused one both as [Q; K; V] blocks and per head) and "
               "no reading reproduces your output: check the names and .T, or your forward differs from the "
               "lesson's in a way no known mistake explains (the failing checks say where)")


def map_help(ctx) -> str:
    """What would help when no mapping is certain: --map, or, when --map was given, what that did not settle."""
    return MAPPED_HELP if getattr(ctx.subject, "weight_map", None) else MAP_HELP


@dataclass
class Mapping:
    index: int | None  # layout index on the base configuration; None: no certain mapping
    style: int | None  # call style index; None: mha-check could not tell how to call forward
    how: str = ""  # "reference" | "mistake" | "structure" | "" (unknown)
    description: dict = field(default_factory=dict)  # role -> parameter reading, of the chosen layout
    layout_how: str = ""
    style_text: str = ""
    mistakes: list[str] = field(default_factory=list)  # how == "mistake": the mutants whose numbers it has
    problem: str = ""  # why there is no certain mapping (or no call style)
    raised: str = ""  # the module's own forward raised with every style: this message (a bug of the student's)
    tried: list[str] = field(default_factory=list)
    runs: bool = False  # the forward ran with some style and gave an output of the expected shape
    note: str = ""

    @property
    def certain(self) -> bool:
        return self.index is not None

    @property
    def reproduced(self) -> bool:
        return self.how == "reference"

    def to_dict(self) -> dict:
        return {"layout": self.description, "how": self.layout_how, "proof": self.how or "none",
                "call": self.style_text, "mistakes": self.mistakes, "problem": self.problem, "tried": self.tried,
                "note": self.note}


def prove(ctx) -> Mapping:
    """The proof on the base configuration.  A layer that takes d_in and d_out but generalises them differently from
    the lesson (timm: Q/K/V in the input width, only the output projection to d_out) runs fine and has no reading
    of (d_in -> d_out) projections: it is then checked with d_in = d_out, where it is the lesson's layer, and the
    report says so.  Never when its forward fails or its output has the wrong shape: that is a finding."""
    proof = _prove(ctx)
    if proof.certain or not ctx.separate_widths or not proof.runs or ctx.subject.build(ctx.base).layouts:
        return proof
    ctx.square_only = True
    square = _prove(ctx)
    if square.certain:
        square.note = ("your layer takes separate input and output widths but does not map Q, K, V from d_in to "
                       "d_out as the lesson does; it was checked with d_in = d_out")
        return square
    ctx.square_only = False
    return proof


MASKING_KNOBS = {"mask", "fill", "empty_rows"}  # a variant that changes how the future is masked


def _caller_masks(info, style: int) -> bool:
    """This call gives forward only its input, though forward also takes a mask or a flag that turns masking on:
    a layer that leaves the mask to its caller is not "a layer that forgot the mask" when called without one."""
    bare = info.call_bare or [True] * len(info.call_styles)  # a child that did not say: every style counts
    return len(info.call_styles) > 1 and bare[style]


def _prove(ctx) -> Mapping:
    cfg = ctx.base
    inst = ctx.subject.build(cfg)
    info = inst.info
    if not info.call_styles:
        return Mapping(None, None, problem=info.call_problem)
    x = ctx.input(cfg, "proof")
    outputs, raised = {}, ""
    for style in range(len(info.call_styles)):
        inst.style = style
        try:
            outputs[style] = inst.forward(x)
        except TargetFailure as e:
            raised = raised or e.message
    plain = len(info.call_styles) == 1  # forward takes x (or x, x, x) and no mask: nothing to prove about the call
    if not outputs:  # the forward raised whichever way it was called: the student's bug, shown by output-shape
        return Mapping(None, 0, problem=f"your forward raised: {raised}", raised=raised,
                       style_text=info.call_styles[0])
    runs = any(y.shape == (cfg.batch, cfg.n, cfg.d_out) for y in outputs.values())
    indices = list(range(len(info.layouts)))
    weights = {i: numpy_ref.Weights(**read) for i, read in zip(indices, inst.read_weights_many(indices))}
    tried = [f"{lay.how}: " + ", ".join(f"{r}={p}" for r, p in lay.roles.items()) for lay in info.layouts]

    def found(style: int, index: int | None, how: str, mistakes=(), problem="") -> Mapping:
        layout = info.layouts[index] if index is not None else None
        return Mapping(index, style, how, dict(layout.roles) if layout else {}, layout.how if layout else "",
                       info.call_styles[style], list(mistakes), problem, tried=tried, runs=runs)

    for style, own in outputs.items():  # 1. the reference reproduces the module's output
        for i, w in weights.items():
            if close(own, numpy_ref.forward(x, cfg.heads, w)):
                return found(style, i, "reference")
    matches: dict[tuple[int, int], list[str]] = {}  # 2. one known mistake does
    for style, own in outputs.items():
        for i, w in weights.items():
            ref = numpy_ref.forward(x, cfg.heads, w)
            for mid, knobs in mutants.variants().items():
                if _caller_masks(info, style) and MASKING_KNOBS & set(knobs) or not variants.applies(w, cfg.heads,
                                                                                                       knobs):
                    continue  # forward takes a mask or a causal flag and got none: unmasked numbers are no mistake
                theirs = variants.forward(x, cfg.heads, w, **knobs)
                if same(own, theirs) and not same(theirs, ref):  # NaN where the mistake has NaN
                    matches.setdefault((style, i), []).append(mid)
    readings = {(i, frozenset(mids)) for (_, i), mids in matches.items()}
    if len(readings) == 1:  # one reading of the parameters (equivalent mask shapes may all work)
        (style, i), mids = next(iter(matches.items()))
        return found(style, i, "mistake", sorted(mids))
    structural = [i for i, lay in enumerate(info.layouts) if lay.certain]
    if plain and 0 in outputs and len(info.layouts) == 1 and structural:  # 3. the only reading there is
        return found(0, structural[0], "structure")
    if not info.layouts:
        problem = info.layout_problem
    elif matches:
        problem = "several readings of your parameters reproduce different known mistakes"
    else:
        problem = ("no reading of your parameters lets the lesson's reference (or a known mistake) reproduce your "
                   "module's own output")
    style = 0 if plain else None
    if style is None:
        problem += ("; and mha-check could not tell how to pass the causal mask to your forward (tried: "
                    + "; ".join(info.call_styles) + ")")
    return Mapping(None, style, problem=problem, tried=tried, runs=runs,
                   style_text=info.call_styles[0] if style is not None else "")
