"""Which of the student's parameters are W_q, W_k, W_v, W_o (and biases), and how forward is called: proved, not
guessed.

The child offers candidate readings of the parameters (layouts: named Linear layers, fused q/k/v read as [Q; K; V]
or per head, raw matrices in either orientation, per-head modules...) and candidate ways to call forward (x alone,
or with a causal mask in one of the usual conventions).  On the base configuration, with the module's own weights,
this module looks for the pair under which

1. the lesson's reference reproduces the module's own output: the mapping is *reproduced*, the module computes the
   right function under it; or else (1b) it does with x given sequence first, (n, B, d), where the module shows it
   reads its input so (`_sequence_first`), and every check then calls it so; or else
2. exactly one known mistake's numeric variant reproduces it (the output read sequence first too, where that
   holds and none reproduces it read the usual way; or else with the heads in another order, a reading its
   output points to: `_mistake_reordered`): the mapping is proven *and* the mistake identified; or else,
   for a layer that takes only x, two known mistakes made together do, under one reading only
   (`harness.engine.pairs`: a fused q/k/v with the view order wrong in both the split and the merge); or else
3. the layout is the only possible reading of the parameters (named nn.Linear layers, nn.MultiheadAttention or the
   user's --map, covering every parameter) and forward takes only x: certain *by structure*.

Otherwise the mapping is unknown: the weight-dependent checks then say *cannot tell* (with what was tried and the
--map option), never fail the student on a guess.  Likewise a mask convention is used only once it reproduced.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import mutants
from harness.engine import fitting, head_order, pairs
from harness.engine.compare import close, same
from harness.wire import messages
from harness.wire.config import ROTARY_FRACTION
from harness.wire.errors import TargetFailure
from reference import numpy_ref, variants
from reference.rotary import CONVENTIONS, MIXED, NEGATED, OTHER_THETAS, THETA, Rope, with_rope

MAP_HELP = ("say which parameters play the roles: --map q=NAME --map k=NAME --map v=NAME --map o=NAME (a module or "
            "parameter name; NAME.T for a matrix used as x @ W; --map qkv=NAME for a fused projection)")
MAPPED_HELP = ("the parameters named with --map were tried (a fused qkv one both as [Q; K; V] blocks and per head) "
               "and no reading reproduces your output: check the names and .T, or your forward differs from the "
               "lesson's in a way no known mistake explains (a failing check, where there is one, says where)")


REFUSED_HELP = ("the parameters named with --map could not be read as those roles (see why above), so no reading "
                "was tried: give each of q, k, v, o a module or parameter name (NAME.T for a matrix used as x @ W; a "
                "3-D parameter with a heads axis, as used in einsum('btd,hde->bhte', x, W), is read as one matrix per "
                "head), or --map qkv=NAME for a fused projection")


def map_help(ctx, problem: str = "") -> str:
    """What would help when no mapping is certain: --map, or, when --map was given, what that did not settle.  A
    --map that could not even be read (`problem` says so: a name that is not there, sizes that are not the role's)
    was never tried: saying that no reading reproduced the output would send the student to check their forward."""
    if not getattr(ctx.subject, "weight_map", None):
        return MAP_HELP
    return REFUSED_HELP if problem.startswith("--map") else MAPPED_HELP


@dataclass
class Mapping:
    index: int | None  # layout index on the base configuration; None: no certain mapping
    style: int | None  # call style index; None: mha-check could not tell how to call forward
    how: str = ""  # "reference" | "mistake" | "structure" | "mixed-rotary" (a rotary layer's pairs turned by tables of
    # the other convention: `_mixed_tables`) | "" (unknown)
    description: dict = field(default_factory=dict)  # role -> parameter reading, of the chosen layout
    layout_how: str = ""
    style_text: str = ""
    mistakes: list[str] = field(default_factory=list)  # how == "mistake": the mutants whose numbers it has
    problem: str = ""  # why there is no certain mapping (or no call style)
    raised: str = ""  # the module's own forward raised with every style: this message (a bug of the student's)
    tried: list[str] = field(default_factory=list)
    runs: bool = False  # the forward ran with some style and gave an output of the expected shape
    note: str = ""
    rope: Rope | None = None  # the rotary embedding under which the proof reproduced (None: the lesson's, none)
    head_order: head_order.HeadOrder | None = None  # heads merged in another order, read on W_o (harness.engine.
    # head_order): the order on the base configuration; every other one finds its own (Context.build)

    @property
    def certain(self) -> bool:
        return self.index is not None

    def to_dict(self) -> dict:
        return {"layout": self.description, "how": self.layout_how, "proof": self.how or "none",
                "call": self.style_text, "mistakes": self.mistakes, "problem": self.problem, "tried": self.tried,
                "note": self.note, **({"rope": self.rope.describe()} if self.rope else {}),
                **({"head_order": self.head_order.to_dict()} if self.head_order else {})}


def prove(ctx) -> Mapping:
    """The proof on the base configuration (`_proven`), saying where weight normalisation was folded (`_folded`)."""
    return _folded(ctx, _proven(ctx))


FOLDED_NOTE = ("the weight normalisation of {names} (W = g · v / ||v||) was folded into {each} weight after building: "
               "{it} read, written, counted and differentiated as one plain parameter, the forward unchanged")


def _folded(ctx, proof: Mapping) -> Mapping:
    """The proof with a note naming the weights whose normalisation the child folded into them (harness.child.worker.
    _bake_weight_norm): the report's reading of the parameters rests on that, and said nothing of it."""
    try:
        names = ctx.subject.build(ctx.base).info.weight_norm
    except TargetFailure:
        return proof
    if names:
        note = FOLDED_NOTE.format(names=", ".join(names), each="each" if len(names) > 1 else "its",
                                  it="each is" if len(names) > 1 else "it is")
        proof.note = f"{proof.note}; {note}" if proof.note else note
    return proof


def _proven(ctx) -> Mapping:
    """The proof on the base configuration.  A layer that takes d_in and d_out but generalises them differently from
    the lesson (timm: Q/K/V in the input width, only the output projection to d_out) runs fine and has no reading
    of (d_in -> d_out) projections: it is then checked with d_in = d_out, where it is the lesson's layer, and the
    report says so.  Never when its forward fails or its output has the wrong shape: that is a finding."""
    proof = _prove(ctx)
    if proof.certain or not ctx.separate_widths or not proof.runs or ctx.subject.build(ctx.base).layouts:
        return _without_out_proj(ctx, proof)
    ctx.square_only = True
    square = _prove(ctx)
    if square.certain:
        square.note = ("your layer takes separate input and output widths but does not map Q, K, V from d_in to "
                       "d_out as the lesson does; it was checked with d_in = d_out")
        return _without_out_proj(ctx, square)
    ctx.square_only = False
    return proof


NO_OUT_PROJ_NOTE = ("your layer has no output projection: it was read as the lesson's layer without its last step "
                    "(W_o the identity), under which {how} computes your output; the checks of the math judge the "
                    "rest of the layer that way, and param-count the missing projection")


def _without_out_proj(ctx, proof: Mapping) -> Mapping:
    """A multi-head layer proven under a reading without W_o (harness.child.layouts.without_out_proj): the report
    says so, beside what the proof already notes.  Proven as any reading is: the lesson's layer with W_o = I, or a
    known mistake (one, or two made together) in it, computes the module's own output; otherwise there is no
    mapping, and the weight checks stay cannot-tell."""
    if not proof.certain or "wo" in proof.description or not ctx.form.out_proj:
        return proof
    how = "the lesson's math" if proof.how == "reference" else "your rotary layer as written" \
        if proof.how == "mixed-rotary" else f"the known mistake {' and '.join(proof.mistakes)}"
    note = NO_OUT_PROJ_NOTE.format(how=how)
    proof.note = f"{note}; {proof.note}" if proof.note else note
    return proof


MASKING_KNOBS = {"mask", "fill", "empty_rows"}  # a variant that changes how the future is masked
POSITIONS = "=arange(n) "  # in a call style that gives forward the token positions (harness.child.calling)


SEQ_FIRST = ", x given as (n, B, d), sequence first, its output read back as (B, n, d)"
SEQ_FIRST_NOTE = ("your layer reads its input sequence first, as nn.MultiheadAttention with batch_first=False "
                  "does: called so, {how} computes your output, and every check calls it so")


NORMS_OFF = ", with {names} switched off (returning {its} input)"
RESIDUAL_OFF = " and x taken away from the output"
NORMS_OFF_NOTE = ("your layer keeps {what} inside itself, which the lesson's layer does not have{residual}: with "
                  "{it} switched off{taken}, {how} computes your output, and every check calls it so, except "
                  "parameters-used, which runs your layer as it is; {it_is} not judged")


def style_text(info, style: int) -> str:
    """How forward is called, in words: a style of the child's, the same call with x sequence first, or with the
    layer's normalisations switched off (harness.child.calling.Calling.pick)."""
    family, i = divmod(style, len(info.call_styles))
    if family < 2:
        return info.call_styles[i] + (SEQ_FIRST if family else "")
    names = " and ".join(n.path for n in info.norms)
    return (info.call_styles[i] + NORMS_OFF.format(names=names, its="its" if len(info.norms) == 1 else "their")
            + (RESIDUAL_OFF if family == 3 else ""))


def norms_switched_off(info, style: int | None) -> bool:
    """This call style switches the layer's normalisations off (and may take the input away from the output)."""
    return style is not None and bool(info.call_styles) and style // len(info.call_styles) >= 2


def as_it_is(info, style: int) -> int:
    """The same call with the layer's normalisations on and its output as it is: for a check about the layer as a
    whole (every parameter used), not about its attention."""
    return style % len(info.call_styles) if norms_switched_off(info, style) else style


def norm_parameters(info) -> list[tuple[str, int]]:
    """The parameters (name, size) of the normalisations the layer keeps inside itself (harness.child.norms)."""
    names = {p for norm in info.norms for p in norm.params}
    return [(p.name, math.prod(p.shape)) for p in info.params if p.name in names]


def norms_left_out(info) -> tuple[int, str]:
    """(how many parameters the layer's normalisations hold, what a count says of them): param-count and the
    trace's arithmetic leave them out of the layer's count, and say so."""
    held = norm_parameters(info)
    size = sum(s for _, s in held)
    if not info.norms:
        return 0, ""
    names = ", ".join(name for name, _ in held) or "none"
    return size, (f"; not counted: the {size} parameter{'' if size == 1 else 's'} ({names}) of "
                  f"{describe_norms(info)}, which your layer keeps inside itself and which "
                  f"{'is' if len(info.norms) == 1 else 'are'} no part of the attention")


def describe_norms(info) -> str:
    """The layer's normalisations in words, with what each is and none of the lesson's letters: "a normalisation,
    layer_norm (LayerNorm)", "2 normalisations, ln_1 (LayerNorm) and ln_2 (RMSNorm)"."""
    named = " and ".join(f"{n.path} ({n.kind})" for n in info.norms)
    return f"a normalisation, {named}" if len(info.norms) == 1 else f"{len(info.norms)} normalisations, {named}"


def _sequence_first(inst, info, x, outputs: dict, cfg) -> dict[int, object]:
    """The module's outputs with x given sequence first, (n, B, d), each style's under its index + the number of
    styles (harness.child.calling.Calling.pick), where the module shows it reads its input so: called the usual
    way, the last sequence alone gives another output than within the batch (the batch axis is read as the
    tokens: a causal layer's last token sees the others), or every call raised (a mask for the n tokens cannot fit
    the scores of a layer that reads the batch as its tokens: a forward that requires its mask runs no other way),
    while called sequence first it gives the same (each sequence on its own, as a layer must treat them).  {}
    otherwise: a layer whose batch is independent the usual way is read the usual way, and a batch-first layer's
    own mistake is never excused as a layout (what runs only sequence first must still be reproduced there)."""
    if cfg.batch < 2:
        return {}
    count = len(info.call_styles)
    if outputs:
        first = min(outputs)
        try:
            inst.style = first
            if same(inst.forward(x[-1:]), outputs[first][-1:]):
                return {}
        except TargetFailure:
            return {}
    found = {}
    for style in [min(outputs)] if outputs else range(count):  # the first style that ran, else the first that runs
        try:  # sequence first
            inst.style = count + style
            whole, last = inst.forward(x), inst.forward(x[-1:])
        except TargetFailure:
            continue
        if whole.shape == (cfg.batch, cfg.n, cfg.d_out) and same(last, whole[-1:]):
            found[count + style] = whole
        break
    if not found:
        return {}
    for style in range(count):  # every other style, also one that raised called the usual way (its mask for the n
        if count + style not in found:  # tokens, as above): torchtext's container, ESM's layer
            inst.style = count + style
            try:
                found[count + style] = inst.forward(x)
            except TargetFailure:
                continue
    return found


def _no_proof(ctx, info, rotary: str, matched: bool, thetas) -> str:
    """Why no reading of the parameters is proven: none offered, a rotary layer of no known convention, several
    readings reproducing different known mistakes, or none reproducing the module's output."""
    if not info.layouts:
        return info.layout_problem
    if rotary == POSITIONS_TAKEN and not matched:  # positions alone say a position encoding, not which (ALiBi's
        # slopes, a learned table: Realzoo22's trinix ALiBi layer was told of rotary bases it has none of)
        return (f"your layer encodes the token positions ({rotary}: a rotary embedding, ALiBi's biases or a learned "
                "table), and no rotary convention (interleaved pairs, rotate-half) with base "
                f"{' or '.join(f'{t:g}' for t in thetas)} nor a known mistake reproduces its output: mha-check has "
                "no reference for any other position encoding") + _partial(ctx) + _beside_the_readings(info)
    if rotary and not matched:
        return (f"your layer encodes positions with a rotary embedding ({rotary}), and neither convention "
                f"(interleaved pairs, rotate-half) with base {' or '.join(f'{t:g}' for t in thetas)} nor a known "
                f"mistake reproduces its output: mha-check has no reference for it (if its base differs, pass "
                f"--arg NAME=VALUE for the constructor's theta parameter)") + _partial(ctx) + _beside_the_readings(info)
    if matched:
        return "several readings of your parameters reproduce different known mistakes"
    return _unreproduced(ctx, info)


def _partial(ctx) -> str:
    """A layer told by --arg to turn only part of each head's features (a fraction below 1.0) has a form no
    reference of mha-check's computes; without that --arg it gets 1.0 (harness.wire.config.ROTARY_FRACTION), which
    checks the rest of the layer."""
    fraction = rotary_fraction(ctx)
    if not fraction or fraction in ctx.signature.derived:
        return ""
    return (f"; if {fraction} (given with --arg) makes it turn only part of each head's features (a partial rotary "
            f"embedding, as GPT-NeoX's), no reference of mha-check's computes that: without that --arg mha-check "
            f"gives {fraction}=1.0 and checks the rest of the layer with every feature turned")


def _say_how_called(info, proof: Mapping) -> Mapping:
    """A proof under a call with x sequence first, or with the layer's normalisations switched off, says so in its
    note."""
    if proof.style is None or proof.style < len(info.call_styles):
        return proof
    how = "the lesson's layer" if proof.how == "reference" else "your rotary layer as written" \
        if proof.how == "mixed-rotary" else f"the known mistake {' and '.join(proof.mistakes)}"
    if not norms_switched_off(info, proof.style):
        proof.note = SEQ_FIRST_NOTE.format(how=how)
        return proof
    one = len(info.norms) == 1
    residual = proof.style // len(info.call_styles) == 3
    proof.note = NORMS_OFF_NOTE.format(
        what=describe_norms(info), how=how, it="the normalisation" if one else "them",
        residual=", and adds its input back to the output (a residual connection)" if residual else "",
        taken=" and the input taken away from the output" if residual else "",
        it_is="the normalisation itself is" if one else "the normalisations are")
    return proof


def _reference_reproduces(outputs: dict, weights: dict, x, heads: int,
                          ropes: list) -> tuple[int, int, Rope | None] | None:
    """(style, reading, rotary embedding) of the first output the lesson's layer reproduces, without a rotary
    embedding or under one of `ropes` (ESM's sequence-first rotary layer), or None."""
    return next(((style, i, rope) for rope in ropes for style, own in outputs.items() for i, w in weights.items()
                 if close(own, numpy_ref.forward(x, heads, w, rope=rope))), None)


def _mistakes_either_way(info, outputs: dict, seq_first: dict, weights: dict, x, heads: int, ropes: list, form: str):
    """The known mistakes whose numbers the module's output has (`_mistakes`, named under the first rotary base
    only); where none has, those its output read sequence first has (`_sequence_first`; no rotary layer is read
    so)."""
    matches, rope_of = _mistakes(info, outputs, weights, x, heads, ropes, form, only_ran=True)
    if matches or not seq_first:
        return matches, rope_of
    return _mistakes(info, seq_first, weights, x, heads, [None], form)


def _after_norms_off(info, mids) -> bool:
    """The mistakes found prove a reading only once the layer's normalisations switched off have been tried: each is
    named only where the trace marks it (a divisor read off the output fits much: TimesFM's RMSNorm on q and k, on
    one input, was read as a scale no catalogued mistake has, and its correct layer failed reference-match)."""
    return bool(info.norms) and set(mids) <= mutants.named_by_trace()


def _caller_masks(info, style: int, ran=None) -> bool:
    """This call gives forward only its input, though forward also takes a mask or a flag that turns masking on:
    a layer that leaves the mask to its caller is not "a layer that forgot the mask" when called without one.  With
    `ran` (the styles that ran), only those count: where every call that gives a mask or the flag raised (its
    `attn_mask` must be an object of the package's own, neuralforecast's TriangularCausalMask, and a tensor raises),
    no caller masks this layer through its forward, and the plain call is the layer's own, as causal-leakage judges it
    ("under every way of calling it that ran")."""
    bare = info.call_bare or [True] * len(info.call_styles)  # a child that did not say: every style counts
    style %= len(info.call_styles)  # the same call with x sequence first (`SEQ_FIRST`) gives the same arguments
    counted = bare if ran is None else [bare[s % len(info.call_styles)] for s in ran]
    return len(info.call_styles) > 1 and bare[style] and not all(counted)  # (styles that differ only in the token
    # positions they give are all bare: the forward takes no mask)


@variants.sharing_scores  # every mistake on the same input and weights (issue 27)
def _mistakes(info, outputs: dict, weights: dict, x, heads: int, ropes: list, form: str, only_ran: bool = False):
    """(style, layout) -> the known mistakes whose numbers the module's output has, and the rotary embedding they
    were found under (a plain layer's mistakes are tried on rotary layers too, a rotary mistake only on those; a
    mistake of another member of the family, a single head's, never).  `only_ran`: a plain call counts as the
    layer's own where no call that gives a mask ran (`_caller_masks`) - for the calls read the usual way, as
    causal-leakage judges them; read sequence first, a layer whose mask has a layout mha-check does not offer
    (labml's (n, n, B)) ran only unmasked, and is no evidence of a layer that forgot its mask."""
    matches: dict[tuple[int, int], list[str]] = {}
    rope_of: dict[tuple[int, int], Rope | None] = {}
    verdicts: dict[tuple, bool] = {}  # (the output's bytes, reading, rotary, mistake) -> whether it is the mistake's:
    # a layer called in many ways mostly gives one output (a CS224n layer's seventeen ways to pass a mask it never
    # reads), whose mistakes are asked once, not once per way (issue 27: a third of its diagnosis's time)
    for style, own in outputs.items():
        same_as = (own.shape, own.dtype.str, own.tobytes())
        for i, w in weights.items():
            for r, rope in enumerate(ropes):
                ref = None
                for mid, knobs in mutants.variants().items():
                    if mutants.form(mid) != form:
                        continue  # a mistake of another member of the family (single head): not this layer's
                    if _caller_masks(info, style, outputs if only_ran else None) and MASKING_KNOBS & set(knobs):
                        continue  # forward takes a mask or a causal flag and got none: unmasked numbers are no mistake
                    if not variants.applies(w, heads, knobs):
                        continue  # a grouped layer's mistake on plain weights, or keys from W_q on narrower W_k
                    if rope is None and "rope" in knobs:
                        continue  # a rotary mistake is tried under the rotary conventions
                    key = (same_as, i, r, mid)
                    if key not in verdicts:
                        if ref is None:
                            ref = numpy_ref.forward(x, heads, w, rope=rope)
                        free = mutants.fitted().get(mid, ())  # a value read off the output (a fill of -1e-12 as
                        # much as -10), under the rotary conventions too: a reading that is not the mistake's costs
                        # two evaluations (fitting rejects it when what no fill moves differs), a rotary layer's fill
                        # is fitted
                        theirs = fitting.output(x, heads, w, with_rope(knobs, rope), free, own)
                        verdicts[key] = same(own, theirs) and not same(theirs, ref)  # NaN where the mistake has NaN
                    if verdicts[key]:
                        matches.setdefault((style, i), []).append(mid)
                        rope_of[style, i] = rope
    return {k: _catalogued_first(mids) for k, mids in matches.items()}, rope_of


def _catalogued_first(mids: list[str]) -> list[str]:
    """The mistakes found, less a divisor read off the output (scale-other, named only where the trace marks it)
    where a catalogued scale's own reproduces it too: `/ dh` is scale-by-dh, and any divisor fits it as well."""
    by_trace = mutants.named_by_trace()
    named = {k for m in mids if m not in by_trace for k in mutants.variants().get(m, {})}
    return [m for m in mids if not (m in by_trace and set(mutants.fitted().get(m, ())) & named)]


@variants.sharing_scores  # every mistake on the same input and weights (issue 27)
def _pair_mistakes(own, weights: dict, x, heads: int, form: str,
                   ropes: list) -> dict[tuple[int, Rope | None], tuple[str, str]]:
    """(reading, rotary embedding) -> the one pair of known mistakes whose composed variant reproduces the module's
    output under it (harness.engine.pairs, its rules of evidence on this one input: a mirror of a correct layer is
    never half of a pair; each mistake at its catalogued value), for a layer with no mask to pass that no single
    mistake reproduces.  A fused q/k/v projection with the view order wrong in both the split and the merge is mapped
    so, then diagnosed on every configuration; so is a rotary layer with two rotary mistakes (the values rotated and
    the keys not: no rotary convention and no one mistake reproduced it, and every weight check was cannot-tell with
    no check failing).  A reading with several pairs its numbers cannot tell apart is no proof."""
    out = {}
    for rope in ropes:
        for i, w in weights.items():
            expected = numpy_ref.forward(x, heads, w, rope=rope)
            if own.shape != expected.shape:
                continue
            knobs = {m: k for m, k in mutants.variants().items() if mutants.form(m) == form
                     and (rope is not None or "rope" not in k) and variants.applies(w, heads, k)}
            pair = pairs.choose(pairs.reproducing([pairs.Sample(x, heads, w, own, expected)], knobs, {}, rope),
                                [], mutants.catalogue())  # the catalogue's values, none read off the output: a
            # value fitted to its extreme (+40 added to the future and the diagonal) mimics a mask that hides the past
            if pair:
                out[i, rope] = pair
    return out


def _no_mask_to_pass(info) -> bool:
    """Forward takes x alone, or x and the token positions (a rotary layer's): no mask or flag a caller passes, so
    the plain call is the layer's own."""
    bare = info.call_bare or [True] * len(info.call_styles)
    return len(info.call_styles) == 1 or all(POSITIONS in s for s in info.call_styles) and all(bare)


@variants.sharing_scores  # every mistake on the same input and weights (issue 27)
def _own_mask_mistakes(info, outputs: dict, w, x, heads: int, rope, form: str) -> list[str]:
    """The known masking mistakes whose numbers a forward that takes an optional mask computes when called without
    one (its default mask of 0s and 1s added to the scores, say), where a caller's mask made it the reference: it
    masks by itself, wrongly (issue 28).  Nothing for a layer that leaves the mask to its caller (its plain call is
    unmasked attention, the reference's numbers without a mask) or whose plain call is no known mistake's: a
    correct layer passes under the convention that makes it causal, whatever the others do.  An unmasked plain call
    is no-mask's where the layer keeps a mask over the context that holds one value everywhere (`_inert_own_mask`:
    eztransformer's all-True buffer, which a caller's attn_mask replaces)."""
    if not _caller_masks(info, 0) or 0 not in outputs:
        return []
    own, ref = outputs[0], numpy_ref.forward(x, heads, w, rope=rope)
    if own.shape != ref.shape:
        return []
    if same(own, variants.forward(x, heads, w, **with_rope({"mask": "none"}, rope))):
        return [NO_MASK] if _inert_own_mask(info, form) else []  # the caller's mask, unless its own hides nothing
    wrong = []
    for mid, knobs in mutants.variants().items():
        if mutants.form(mid) != form or not MASKING_KNOBS & set(knobs) or not variants.applies(w, heads, knobs) \
                or (rope is None and "rope" in knobs):
            continue
        free = mutants.fitted().get(mid, ())
        theirs = fitting.output(x, heads, w, with_rope(knobs, rope), free, own)
        if same(own, theirs) and not same(theirs, ref):
            wrong.append(mid)
    return sorted(wrong)


NO_MASK = "no-mask"


def _inert_own_mask(info, form: str) -> bool:
    """The layer keeps a mask over the context that holds one value everywhere (the child's `inert_masks`): its plain
    call's unmasked attention is then its own mask hiding nothing, not a mask left to its caller - a layer that
    leaves the mask to its caller keeps no such buffer, or a causal one it does not use."""
    return bool(getattr(info, "inert_masks", None)) and NO_MASK in mutants.variants() and mutants.form(NO_MASK) == form


ROTARY_WORDS = ("cos", "sin", "freq", "freqs", "rope", "rotary", "theta", "cis", "inv")


def rotary_fraction(ctx) -> str | None:
    """The constructor's parameter for the share of each head's features a rotary embedding turns (GPT-NeoX's
    rotary_pct, labml-nn's rope_percentage, HF's partial_rotary_factor), or None."""
    return next((p for p in ctx.signature.params if ROTARY_FRACTION.search(p.lower())), None)


def _rotary_evidence(ctx, info) -> str:
    """What says the layer is rotary, in words, or "": a tensor it keeps named like a rotary table (cos, sin,
    inv_freq, freqs_cis), a rotary base among its constructor's parameters, or positions its forward takes."""
    names = [p.name for p in info.buffers] + list(info.plain_tensors)
    tables = [n for n in names if set(re.split(r"[^a-z]+", n.lower().rsplit(".", 1)[-1])) & set(ROTARY_WORDS)]
    if tables:
        return "it keeps " + ", ".join(tables[:3])
    if getattr(ctx.signature, "rope_theta", None) and not ctx.signature.config_param:
        return "its constructor takes a rotary base"
    if rotary_fraction(ctx):  # labml-nn's NeoX layer makes its tables on the first call, as plain attributes
        return f"its constructor takes {rotary_fraction(ctx)}"
    if any(POSITIONS in s for s in info.call_styles):
        return POSITIONS_TAKEN
    return ""


POSITIONS_TAKEN = "its forward takes the token positions"  # evidence of a position encoding, not of which


def _thetas(ctx) -> list[float]:
    """The rotary bases to try: the one the constructor was given (the child reports it), else the usual ones."""
    bound = getattr(ctx.signature, "rope_theta", None)
    return [float(bound)] if bound else [THETA, *OTHER_THETAS]


def _weights(ctx, read: dict) -> numpy_ref.Weights:
    """A reading's weights for the reference; a reading without W_o (the single-head form, or a multi-head layer
    that has no output projection) gets the identity in its place."""
    if "wo" not in read:
        return ctx.completed(numpy_ref.Weights(**{**read, "wo": None}), without_out_proj=True)
    return numpy_ref.Weights(**read)


def unread_parameters(info) -> list[tuple[str, int]]:
    """The parameters (name, size) that no reading of the module takes for W_q, W_k, W_v, W_o or a bias: a LayerNorm
    kept inside the layer, a gate, a scale.  Empty when nothing was read."""
    if not info.layouts:
        return []
    read = {_parameter_of(piece) for layout in info.layouts for text in layout.roles.values()
            for piece in text.split("+")}
    # `--map q=linear_q` names a module: its piece is "linear_q", standing for linear_q.weight (and .bias)
    read |= {name + ".weight" for name in read}
    return [(p.name, math.prod(p.shape)) for p in info.params if p.name not in read]


def _parameter_of(piece: str) -> str:
    """The parameter a piece of a reading reads (`W_q.T[0:6]`, `qkv[:, 0][1]`: its name + indices + `.T` + rows, as
    harness.child.layouts.Piece.describe writes it): the text before its first index, without `.T`.  In linear time:
    the text is the child's, and the lazy `re.sub` of a bracketed index it replaced took time quadratic in a piece
    without `]` (a reading of 40,000 `[`s, sent by a patched worker, held the parent 5 minutes; 800,000 fit in a
    header; red team 15)."""
    return piece.strip().split("[", 1)[0].removesuffix(".T")


def unread_beside_norms(info) -> list[tuple[str, int]]:
    """The parameters (name, size) no reading takes, but those of a normalisation the layer keeps inside itself (a
    pre-norm's LayerNorm, harness.child.norms): they are not the attention's, and a norm is no mistake of it."""
    norm = {name for name, _ in norm_parameters(info)}
    return [(name, size) for name, size in unread_parameters(info) if name not in norm]


def frozen_constants(info) -> list[tuple[str, int]]:
    """The frozen parameters (requires_grad=False) that no reading takes for a weight or a bias: constants of the
    layer kept as parameters (tsai's scale head_dim ** -0.5, labml's RoPE theta of dh / 2 elements), which nothing
    learns, as a buffer would be; param-count and head-invariance count them like buffers, not at all.  A frozen W_q
    is still a W_q (counted; gradient-match finds it takes no gradient).  (A normalisation's parameters are left out
    by norm_parameters.)"""
    return [(name, size) for name, size in unread_beside_norms(info) if name in info.frozen]


def _beside_the_readings(info) -> str:
    """What a reading cannot account for, when no reading reproduced the module: parameters none of them takes (a
    LayerNorm inside the layer, as PaLM's pre-norm) compute something the lesson's layer does not, which alone keeps
    every reading from reproducing it.  Said as a possible reason, with the names: a rotary layer's cannot-tell
    blamed only its rotary convention when the norm beside it was the likelier cause."""
    unread = unread_beside_norms(info)
    said = (f"; your layer also keeps {describe_norms(info)}, which the lesson's layer does not have: with "
            f"{'it' if len(info.norms) == 1 else 'them'} switched off (and the input taken away from the output, or "
            "not), no reading reproduces it either" if info.norms else "")
    if not unread:
        return said
    names = ", ".join(name for name, _ in unread)
    return (said + f"; your layer also keeps {names}, which no reading takes for W_q, W_k, W_v, W_o or a bias: what "
            f"{'it computes' if len(unread) == 1 else 'they compute'} (a normalisation, a gate, a scale) is not in "
            "the lesson's layer, and may be why nothing reproduces its output")


def _unreproduced(ctx, info) -> str:
    """Why no reading proves the mapping, where readings were offered and none reproduced the module's output; for a
    multi-head layer offered only readings without W_o (harness.child.layouts.without_out_proj), what was missing
    first (no output projection), then that the layer without one was not reproduced either."""
    if ctx.form.out_proj and all("wo" not in lay.roles for lay in info.layouts):
        return (f"{info.layout_problem}; read without an output projection (W_o the identity), neither the lesson's "
                "layer nor a known mistake reproduces your module's own output") + _beside_the_readings(info)
    return ("no reading of your parameters lets the lesson's reference (or a known mistake) reproduce your module's "
            "own output") + _beside_the_readings(info)


_OUR_MASK = re.compile(r", (\w+)=(?:causal mask \(|None\)$)")  # a mask of ours, or None for a required one


def _raised_on_our_masks(styles: list[str], raised_by: dict[int, str]) -> str:
    """The required mask parameter, where every way to call forward gave it a causal mask of mha-check's making and
    the forward raised with each, not always the same error: what it raised follows the mask given, not the
    student's code alone (d3rlpy's required attention_mask is a padding mask (B, T) that it views as (B, 1, 1, T):
    every (n, n) mask raised there, and None at its .dim(); output-shape failed a correct layer, "your code
    raised").  A forward that raises the same error whatever mask it gets (a split's view, before any mask is read)
    is the student's bug, as before; so is one that raises where mha-check gives no mask.  The styles are read from
    the words `harness.child.calling.Style.describe` writes (", NAME=causal mask (...", ", NAME=None)"): a child
    that writes others only loses this "cannot tell", never gains a pass."""
    names = {m.group(1) for m in map(_OUR_MASK.search, styles) if m}
    if len(names) != 1 or len(raised_by) != len(styles) or any(_OUR_MASK.search(s) is None for s in styles):
        return ""
    return names.pop() if len(set(raised_by.values())) > 1 else ""


def _prove(ctx) -> Mapping:
    cfg = ctx.base
    inst = ctx.subject.build(cfg)
    info = inst.info
    if not info.call_styles:
        return Mapping(None, None, problem=info.call_problem)
    x = ctx.input(cfg, "proof")
    outputs, raised, raised_by = {}, "", {}
    for style in range(len(info.call_styles)):
        inst.style = style
        try:
            outputs[style] = inst.forward(x)
        except TargetFailure as e:
            raised, raised_by[style] = raised or e.message, e.message
    plain = len(info.call_styles) == 1  # forward takes x (or x, x, x) and no mask: nothing to prove about the call
    if not outputs and all(POSITIONS in s for s in info.call_styles):  # positions in none of the usual layouts
        return Mapping(None, None, problem=(
            f"your forward raised with the token positions given as 0..n-1 in every layout mha-check knows ((n,), "
            f"(1, n), (B, n)): {raised}; if it wants them in another form, check a factory whose forward takes x "
            f"and makes the positions itself"))
    only_seq_first = {} if outputs else _sequence_first(inst, info, x, outputs, cfg)
    ours = _raised_on_our_masks(info.call_styles, raised_by) if not outputs and not only_seq_first else ""
    if ours:
        return Mapping(None, None, problem=(
            f"your forward raised with every causal mask mha-check can give its required {ours} parameter, "
            f"differently for each ({raised}): the error follows the mask mha-check made, so it may want another "
            f"kind (a padding mask of shape (B, n), say); check a factory whose forward takes x alone and passes "
            f"{ours} itself"))
    if not outputs and not only_seq_first:  # the forward raised whichever way it was called: the student's bug,
        # shown by output-shape
        return Mapping(None, 0, problem=f"your forward raised: {raised}", raised=raised,
                       style_text=info.call_styles[0])
    runs = any(y.shape == (cfg.batch, cfg.n, cfg.d_out) for y in outputs.values()) or bool(only_seq_first)
    indices = list(range(len(info.layouts)))
    weights = {i: _weights(ctx, read) for i, read in zip(indices, inst.read_weights_many(indices))}
    tried = [f"{lay.how}: " + ", ".join(f"{r}={p}" for r, p in lay.roles.items()) for lay in info.layouts]

    def found(style: int, index: int | None, how: str, mistakes=(), problem="", rope=None) -> Mapping:
        layout = info.layouts[index] if index is not None else None
        return _say_how_called(info, Mapping(
            index, style, how, dict(layout.roles) if layout else {}, layout.how if layout else "",
            style_text(info, style), list(mistakes), problem, tried=tried, runs=runs, rope=rope))

    thetas = _thetas(ctx)
    ropes = [None] + [Rope(c, t) for t in thetas for c in CONVENTIONS]  # the lesson's layer, or rotary (RoPE)
    negated = [Rope(c + NEGATED, t) for t in thetas for c in CONVENTIONS] if _rotary_evidence(ctx, info) else []
    proof = _reproduced(ctx, info, outputs, weights, x, ropes + negated, found)  # 1. and 1c. (heads reordered)
    if proof is not None:
        return proof
    seq_first = only_seq_first or _sequence_first(inst, info, x, outputs, cfg)
    reproduced = _reference_reproduces(seq_first, weights, x, cfg.heads, ropes)
    if reproduced:  # 1b. read sequence first, (n, B, d), the reference reproduces it
        style, i, rope = reproduced
        return found(style, i, "reference", rope=rope)
    matches, rope_of = _mistakes_either_way(info, outputs, seq_first, weights, x, cfg.heads,
                                            ropes[:1 + len(CONVENTIONS)], ctx.form.family)  # 2. one known mistake does
    readings = {(i, frozenset(mids)) for (_, i), mids in matches.items()}
    deferred = None
    if len(readings) == 1:  # one reading of the parameters (equivalent mask shapes may all work)
        (style, i), mids = next(iter(matches.items()))
        deferred = found(style, i, "mistake", sorted(set(mids)), rope=rope_of[style, i])
        if not _after_norms_off(info, mids):
            return deferred
    if not matches and not info.norms:  # 2a. one known mistake does with the heads in another order (a layer that
        # keeps a normalisation: in 4., once the lesson's layer without it was tried, as every reading is first)
        proof = _mistake_reordered(info, outputs, weights, x, cfg.heads, ropes[:1 + len(CONVENTIONS)],
                                   ctx.form.family, found)
        if proof is not None:
            return proof
    first = min(outputs, default=None)
    if not matches and _no_mask_to_pass(info) and first == 0:  # 2b. two mistakes at once do
        rotary = _rotary_evidence(ctx, info)  # a rotary layer's pair under the rotary conventions (first base only)
        both = _pair_mistakes(outputs[first], weights, x, cfg.heads, ctx.form.family,
                              ropes[1:1 + len(CONVENTIONS)] if rotary else [None])
        if len(both) == 1:  # under one reading only (a fused projection read in blocks and per head, say)
            ((i, rope), pair), = both.items()
            proof = found(first, i, "mistake", list(pair), rope=rope)
            proof.note = f"that known mistake is two made together ({' and '.join(pair)})"
            return proof
    proof = (_with_norms_off(ctx, inst, info, x, outputs, weights, ropes + negated, found) if info.norms else
             None) or deferred  # 4. with the layer's normalisations switched off (and its residual taken away)
    if proof is not None:
        return proof
    proof = _mixed_tables(ctx, outputs, weights, x, thetas, found)  # 5. rotary pairs turned by tables of the other
    if proof is not None:  # convention: no rotation; read as that, compared with the rotary reference of its pairs
        return proof  # (tried whatever the layer keeps: tables made in forward leave no evidence on the module)
    structural = [i for i, lay in enumerate(info.layouts) if lay.certain]
    rotary = _rotary_evidence(ctx, info)  # a rotary layer no known form reproduces: its reference is unknown
    if plain and 0 in outputs and len(info.layouts) == 1 and structural and not rotary:  # 3. the only reading
        return found(0, structural[0], "structure")
    problem = _no_proof(ctx, info, rotary, bool(matches), thetas)
    style = 0 if plain else None
    if style is None:
        problem += ("; and mha-check could not tell how to pass the causal mask to your forward (tried: "
                    + "; ".join(info.call_styles) + ")")
    return Mapping(None, style, problem=problem, tried=tried, runs=runs,
                   style_text=info.call_styles[0] if style is not None else "")


MIXED_NOTE = ("your rotary embedding turns the pairs {pairs} by cos/sin tables laid out for {other}: the two "
              "features of a pair turn by different angles, which is no rotation (the scores depend on where the "
              "tokens sit, not on t - s only), so mha-check compares your layer with the rotary reference of your "
              "pairs, its tables laid out for them (`mha-check trace` marks the line)")


def _mixed_tables(ctx, outputs: dict, weights: dict, x, thetas, found) -> Mapping | None:
    """A rotary layer whose pairs and tables are of different conventions (reference.rotary.MIXED: repeat_interleave
    tables with rotate_half, or cat((freqs, freqs)) tables with rotate-every-two, fixes28b item 1): the reading under
    which that computation reproduces the module's output, with the rotary reference of its own pairs as the
    reference the checks compare with (they then fail by the numbers: no rotation is the lesson's); None where it
    reproduces nothing."""
    for theta in thetas:
        for convention in CONVENTIONS:
            rope = Rope(convention + MIXED, theta)
            for style, own in outputs.items():
                for i, w in weights.items():
                    if close(own, numpy_ref.forward(x, ctx.base.heads, w, rope=rope)):
                        proof = found(style, i, "mixed-rotary", rope=Rope(convention, theta))
                        half = convention == "half"
                        proof.note = MIXED_NOTE.format(
                            pairs="(x_i, x_i+dh/2) of rotate_half" if half else "(x0, x1), (x2, x3), ... (interleaved)",
                            other="interleaved pairs (each frequency twice in a row, repeat_interleave)" if half else
                            "rotate-half (the frequencies twice over, cat((freqs, freqs)))")
                        return proof
    return None


def _reordered(info, outputs: dict, weights: dict, x, heads: int, ropes: list, found) -> Mapping | None:
    """The reading under which the reference reproduces the module with its heads merged in another order
    (harness.engine.head_order: decided by evidence, on W_o's input columns, or on the rows of W_q, W_k, W_v where
    the layer is read without W_o), tried only where no reading in the plain order reproduced: a correct layer pays
    nothing.  Tried before any known mistake, as every reading is: under it the math is the lesson's, and a mistake
    reproduced under another reading would only be the mirror of a correct layer."""
    for rope in ropes:
        for style, own in outputs.items():
            for i, w in weights.items():
                order = head_order.find(x, heads, w, own, rope, "wo" in info.layouts[i].roles)
                if order is not None:
                    proof = found(style, i, "reference", rope=rope)
                    proof.head_order, proof.note = order, order.describe()
                    return proof
    return None


@variants.sharing_scores  # every mistake on the same input and weights (issue 27)
def _mistake_reordered(info, outputs: dict, weights: dict, x, heads: int, ropes: list, form: str,
                       found) -> Mapping | None:
    """2a. The reading, in another order of the heads, under which one known mistake reproduces the module (issue 28:
    heads merged last first and scores never scaled left every check of the math cannot-tell, and a structural
    reading left the failure unnamed): asked only where neither the reference under any reading nor a mistake in
    the plain order reproduced it, and only under the readings its output points to (head_order.readings: none
    for a scaling, masking or softmax mistake made in the lesson's order), so a correct layer, or one whose mistake
    the plain order shows, pays nothing.  The mirror rule holds as it does for the plain order: the reference was
    tried under every reading first, and a mistake is evidence only where it reproduced under none.  Proven as in
    the plain order: the mistake's variant is the module's output, under exactly one reading of the parameters."""
    matches: dict[tuple, list[str]] = {}
    for rope in ropes:  # the lesson's layer first; a rotary convention only where none reproduced without one
        for style, own in outputs.items():
            for i, w in weights.items():
                for reading in head_order.readings(x, heads, w, own, rope, "wo" in info.layouts[i].roles):
                    read = numpy_ref.Weights(**reading.read(w.as_dict()))
                    mids = _mistakes(info, {style: own}, {i: read}, x, heads, [rope], form)[0].get((style, i))
                    if mids:
                        matches[style, i, reading] = mids
        if matches:
            break
    if len({(i, reading, frozenset(mids)) for (_, i, reading), mids in matches.items()}) != 1:
        return None
    (style, i, reading), mids = next(iter(matches.items()))
    proof = found(style, i, "mistake", sorted(set(mids)), rope=rope)
    proof.head_order, proof.note = reading, reading.describe()
    return proof


def _reproduced(ctx, info, outputs: dict, weights: dict, x, ropes: list, found) -> Mapping | None:
    """The reading (and call) under which the lesson's reference reproduces the module's own output, in the plain
    head order or else in another (`_reordered`); None where there is none."""
    cfg = ctx.base
    for rope in ropes:  # 1. the reference reproduces the module's output (a rotary layer's also turned the
        # other way: the mirror image of a correct rotation is a correct rotation; no mistake is named under it)
        for style, own in outputs.items():
            for i, w in weights.items():
                if close(own, numpy_ref.forward(x, cfg.heads, w, rope=rope)):
                    wrong = _own_mask_mistakes(info, outputs, w, x, cfg.heads, rope, ctx.form.family) if style else []
                    if not wrong:
                        return found(style, i, "reference", rope=rope)
                    proof = found(0, i, "mistake", wrong, rope=rope)  # the plain call: what its default does
                    inert = (f"; its mask {', '.join(info.inert_masks)} holds one value everywhere: it hides nothing"
                             if wrong == [NO_MASK] else "")
                    proof.note = (f"called without a mask, your forward masks by itself and lets the future through "
                                  f"(the numbers of {', '.join(wrong)}{inert}); called as {info.call_styles[style]} "
                                  f"it computes the lesson's layer: the plain call is checked, as a caller who "
                                  f"relies on your default mask gets it")
                    return proof
    return _reordered(info, outputs, weights, x, cfg.heads, ropes, found)


def _norms_off_outputs(inst, info, x, outputs: dict, cfg) -> dict[int, object]:
    """The module's outputs with its normalisations switched off (harness.child.norms), for each call that ran:
    first as it is otherwise, then with the input taken away from the output (a sublayer that adds its input
    back), under the style indices harness.child.calling.Calling.pick gives them.  One round trip where every call
    runs; one a call otherwise."""
    count = len(info.call_styles)
    ran = sorted(s for s in outputs if s < count)
    styles = [2 * count + s for s in ran] + ([3 * count + s for s in ran] if cfg.d_in == cfg.d_out else [])
    try:
        replies = inst.calls([messages.Forward(inst.handle, x, "eval", style=style) for style in styles])
        found = {style: reply.y for style, reply in zip(styles, replies)}
    except TargetFailure:
        found = {}
        for style in styles:
            try:
                found[style] = inst.calls([messages.Forward(inst.handle, x, "eval", style=style)])[0].y
            except TargetFailure:
                continue
    return {style: y for style, y in found.items() if y.shape == (cfg.batch, cfg.n, cfg.d_out)}


def _with_norms_off(ctx, inst, info, x, outputs: dict, weights: dict, ropes: list, found) -> Mapping | None:
    """4. For a layer that keeps a normalisation inside itself (a pre-norm, a post-LN sublayer) and that no reading
    reproduces as it is: the reading and call under which, with its normalisations switched off (and the input it
    adds back taken away), the lesson's reference reproduces it, or else exactly one reading under which known
    mistakes do (in the plain head order, or else in another: `_mistake_reordered`).  None otherwise: the layer
    keeps its cannot-tell."""
    off = _norms_off_outputs(inst, info, x, outputs, ctx.base)
    if not off:
        return None
    proof = _reproduced(ctx, info, off, weights, x, ropes, found)
    if proof is not None:
        return proof
    matches, rope_of = _mistakes(info, off, weights, x, ctx.base.heads, ropes[:1 + len(CONVENTIONS)], ctx.form.family)
    if not matches:  # with the heads in another order (2a)
        return _mistake_reordered(info, off, weights, x, ctx.base.heads, ropes[:1 + len(CONVENTIONS)], ctx.form.family,
                                  found)
    readings = {(i, frozenset(mids)) for (_, i), mids in matches.items()}
    if len(readings) != 1:
        return None
    (style, i), mids = next(iter(matches.items()))
    return found(style, i, "mistake", sorted(set(mids)), rope=rope_of[style, i])
