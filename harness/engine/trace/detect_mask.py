"""Detectors of the causal mask: applied to the scores before the softmax (not after it, not lost), hiding them
with -inf (a finite fill leaks), and hiding exactly the future (s > t), no more, no less.  None of them judges a
forward without a softmax of its own or an nn.MultiheadAttention (which masks inside)."""
from __future__ import annotations

import math
import re

import numpy as np

from harness.engine.trace.naming import Namer
from harness.engine.trace.registry import Findings, detector
from harness.engine.trace.vocabulary import (ADD_PRODUCTS, ADDS, CREATORS, DROPOUTS, FUSED_MHA, MADE_A_BUFFER,
                                             MULTIPLIES,
                                             ONES_ON_ALLOWED, ONES_ON_FUTURE, PASS_THROUGH, SCORES_LIKE, VIEWS,
                                             WEIGHT_ORIGINS, WORKED, number, sdpa_argument, square_pattern)

SAFE_FILL = -1e4  # a finite fill at or below this underflows to an exact 0 after the softmax (float32 and float64)
PROBED_FILL = -5e4  # causal-leakage's probe pushes real scores near -5e4 (the size fp16 activations reach): a fill
# above it leaks there (early GPT-2's -1e4), a fill below it (-1e9) only under the 1e30 probe (the lesson's rule)
RULE_PROBED_FILL = -1e11  # the mask-fill rule's second probe gives each query's own score about -1e12: a fill down
# to this (-1e9, the annotated transformer's) loses to the future there; one below it (finfo.min) is never seen to
UNDERFLOW = -745.0  # e^fill is 0 in float64 below this: the leak shows only once real scores come near the fill
VISIBLE_FILL = -50.0  # above this, the future's weight (exp(fill)) shows in ordinary forward values
CATALOGUED_FILLS = (-10.0, -100.0)  # the fills the finite-fill mutants are told with


def _mask_uses(f: Findings) -> tuple[list[int], list[int], list[int]] | None:
    """The mask operations (applied before a softmax, applied after one, never used), or None when this forward's
    masking is not ours to judge (no softmax of its own, or nn.MultiheadAttention's)."""
    softmaxes = f.named("softmax")
    if not softmaxes or f.fused_mha:
        return None
    before_softmax: set[int] = set()
    for s in softmaxes:
        before_softmax |= f.namer.ancestors(s)
    masks = [m for m in f.namer.mask_ops if not _nan_guard(f, m)]
    applied = [m for m in masks if m in before_softmax]
    after = [m for m in masks if f.namer.derives_from(f.ops[m]["in"][0], ("softmax",))]
    unused = [m for m in masks if m not in applied and m not in after]
    return applied, after, unused


NAN_TESTS = ("isnan", "isinf", "isfinite", "isneginf", "isposinf")


def _nan_guard(f: Findings, m: int) -> bool:
    """A fill whose mask is made only by testing values for NaN or infinity (tfs-mt's
    `weights.masked_fill(torch.isnan(weights), 0.0)` after the softmax, for rows a padding mask hides entirely): it
    hides no token, only non-finite numbers, so it is no mask of the scores, before the softmax or after it."""
    ins = f.ops[m]["in"]
    src = ins[1].get("src") if len(ins) > 1 else None
    if src is None:
        return False
    made = f.namer.ancestors(src) | {src}
    return f.ops[src]["op"] in NAN_TESTS or (f.ops[src]["op"] in ("__invert__", "logical_not") and any(
        f.ops[a]["op"] in NAN_TESTS for a in made))


@detector("mask-after-softmax", "mask-result-unused", "no-mask-applied")
def mask_placement(f: Findings) -> None:
    """The mask applied after the softmax, a masked_fill whose result is dropped, or no mask at all.  A mask applied
    to the scores before the softmax and again to its weights after it (ESPnet zeroes the weights of masked
    positions, so that a row with every key masked gives zeros, not NaN) masks them right where the second fill
    zeroes only positions the first already hid (their weights are 0): its mark named a mistake a correct layer
    does not have.  One that zeroes other positions (or cannot be read) is still marked."""
    uses = _mask_uses(f)
    if uses is None:
        return
    applied, after, unused = uses
    before = _hidden_by(f, applied) if applied else None
    for m in after:
        zeroed = _hidden_by(f, [m])
        if before is not None and zeroed is not None and not (zeroed & ~before).any():
            continue
        softmax = [i for i in f.named("softmax") if i in f.namer.ancestors(m)]
        code = f.ops[softmax[-1]].get("code") if softmax else None
        f.mark(m, {"id": "mask-after-softmax", "text": (
            "the mask is applied after the softmax: the weights of a row no longer sum to 1 (and a finite fill "
            "lets the future through); mask the scores with -inf before the softmax"),
            **({"scores_code": code} if code else {})})  # the softmax's line: the fix masks its scores
        # (harness.engine.rewrite's "after-softmax": a student's trial got the fix in words only)
    for m in unused:
        f.mark(m, {"id": "mask-result-unused", "text": (
            f"the result of {f.ops[m]['op']} is never used: masked_fill is not in place; write "
            "scores = scores.masked_fill(...) (or use masked_fill_)")})
    if f.complete and not applied and not after and not unused:
        f.mark_whole("no-mask-applied", (
            "no operation masks the scores before the softmax: every token sees the future; add "
            "scores = scores.masked_fill(mask[:n, :n], float('-inf')) before the softmax"), _softmax_line(f))


def _softmax_line(f: Findings) -> dict | None:
    """{"at", "code"} of the one softmax line of the forward, where a missing mask belongs (the line before it): a
    student's trial found no line for a mask never applied, though the place to add it is plain.  One line run
    once a head (Karpathy's `Head` in an nn.ModuleList: H softmaxes, all at `wei = F.softmax(wei, dim=-1)`) is
    still the one place; softmaxes on different lines leave it untold."""
    at = {f.ops[i].get("at") for i in f.named("softmax")}
    if len(at) != 1 or at & {None, "?"}:
        return None
    op = f.ops[f.named("softmax")[0]]
    return {"at": op["at"], "code": op.get("code", "")}


FILL_MARKS = ("fill-leaks-visibly", "fill-leaks-invisibly", "fill-below-probe")  # a finite fill's marks (fill_mark)


@detector("mask-on-some-heads")
def mask_on_some_heads(f: Findings) -> None:
    """The mask applied before the softmax to a slice of the heads' scores only (`scores[:, :group]`: a grouped-query
    layer's first group, as if the heads sharing a key/value head shared its mask), the applications together
    covering fewer than the H heads: the other heads' tokens see the future.  Read from the shapes of (B, H, n, n)
    scores; an assignment that writes masked scores back is not a mask of its own."""
    uses, heads = _mask_uses(f), f.cfg.get("heads")
    if uses is None or not heads or heads < 2:
        return
    covered, first = 0, None
    for m in uses[0]:
        op = f.ops[m]
        if op["op"] == "__setitem__" and any(t.get("src") is not None and (f.namer.ancestors(t["src"]) | {t["src"]})
                                             & set(uses[0]) for t in op["in"][1:]):
            continue  # scores[:, :g] = <the masked slice>: written back, counted where it was masked
        shape = next((t.get("shape") for t in op["in"] if len(t.get("shape") or ()) == 4 and
                      (f.namer.sym(t) in SCORES_LIKE or f.namer.derives_from(t, ("scores",)))), None)
        if shape is None or shape[0] != f.cfg.get("batch") or list(shape[-2:]) != [f.cfg.get("n")] * 2:
            return  # not (B, h, n, n) scores: another layout, not ours to count
        covered += shape[1]
        first = m if first is None and shape[1] < heads else first
    if first is not None and covered < heads:
        f.mark(first, {"id": "mask-on-some-heads", "text": (
            f"the mask is applied to {covered} of the {heads} heads' scores only: the other heads see the future; "
            "every head needs the causal mask (the heads that share a key/value head still attend on their own), "
            "so mask the whole (B, H, n, n) scores")}, keep_earlier=True)


@detector(*FILL_MARKS)
def finite_fill(f: Findings) -> None:
    """A mask that fills with a finite number instead of -inf: marked when it leaks at the magnitudes real scores
    reach (above PROBED_FILL, where causal-leakage finds it: -100, -1e4), or at the scores near -1e12 the mask-fill
    rule gives them (down to RULE_PROBED_FILL: -1e9, the lesson's rule, fill-below-probe); one below both
    (torch.finfo(float64).min) is only a note."""
    uses = _mask_uses(f)
    for m in uses[0] if uses else []:
        fill = _fill_value(f.ops[m])
        if fill is not None and math.isfinite(fill) and f.ops[m]["op"] != "__add__":
            if fill > PROBED_FILL:
                f.mark(m, fill_mark(fill), keep_earlier=True)
            elif fill >= RULE_PROBED_FILL:  # -1e9: mask-fill's scores near -1e12 fall below it
                f.mark(m, _below_probe_mark(fill), keep_earlier=True)
            else:
                f.notes.append(f"step {m + 1}: the mask fills with {fill:g}; that underflows to an exact 0 after the "
                               "softmax, but float('-inf') says what is meant")
    for i in f.namer.fused:
        _fused_finite_fill(f, i)
    added = _additive_fill(f)
    if added is not None and added[1] > PROBED_FILL:  # CTRL's `scores + mask * -1e4`: it leaks where -1e4 filled in
        # does (causal-leakage's probe finds both), so it is told as that fill, added
        f.mark(added[0], fill_mark(added[1], added=True), keep_earlier=True)


def _sdpa_float_mask(op: dict) -> tuple[dict | None, np.ndarray | None]:
    """(the recorded tensor, its values with leading axes of 1 dropped) of a float attn_mask without -inf given to
    scaled_dot_product_attention, whose values were recorded; (None, None) otherwise."""
    given = _fused_mask_tensor(op) if op["op"] == "scaled_dot_product_attention" else None
    if given is None or given.get("neginf") or given.get("dtype") == "bool" or "values" not in given:
        return None, None
    values = np.asarray(given["values"], dtype=float)
    while values.ndim > 2 and values.shape[0] == 1:
        values = values[0]
    return given, values


def _fused_finite_fill(f: Findings, i: int) -> None:
    """A float attn_mask given to scaled_dot_product_attention, which adds it to the scores, holding one finite
    negative value on exactly the future and 0 elsewhere (`bias[torch.triu(...)] = -100.0` in __init__): the finite
    fill, added.  Marked at the line that wrote the fill into the mask where the child recorded one (`bias[future] =
    -100.0`, fixes28b), else at the line that made the mask where it recorded that (a buffer), else where it is
    taken for the call (a student's trial: finite-fill-100 named with no line, and trace marked nothing)."""
    given, values = _sdpa_float_mask(f.ops[i])
    if values is None:
        return
    n = f.cfg["n"]
    future = np.triu(np.ones((n, n), bool), 1)
    if values.shape != (n, n) or values[~future].any() or len(set(values[future].tolist())) != 1:
        return
    fill = float(values[future][0])
    if not (math.isfinite(fill) and fill < 0):
        return
    if fill > PROBED_FILL:
        mark = fill_mark(fill, added=True)
    elif fill >= RULE_PROBED_FILL:
        mark = _below_probe_mark(fill)
    else:
        return
    src = given.get("src")
    made = given.get("made") or next((t["made"] for t in (f.ops[src]["in"] if src is not None else [])
                                      if _made_mask(t)), None)
    if made is not None and made.get("written") == fill and made.get("written_at", "?") != "?":
        mark.update(at=made["written_at"], code=made.get("written_code", ""))  # `bias[future] = -100.0`: the write
    elif made is not None and made.get("at", "?") != "?":
        mark.update(at=made["at"], code=made.get("code", ""))
    at = src if src is not None and f.ops[src].get("at", "mha-check") != "mha-check" else i
    f.mark(at, mark, keep_earlier=True)


def _below_probe_mark(fill: float) -> dict:
    """A fill below every score a model reaches, above the mask-fill rule's probe (fill-below-probe): -1e9 is told in
    the catalogue's words; another value (d2l's -1e6) in its own, so that a -1e6 fill is never called "-1e9"."""
    mark = {"id": "fill-below-probe", "text": (
        f"the masked scores are filled with {fill:g}, a finite value: exact while every allowed score stays above it, "
        "but a query whose allowed scores all fall below it attends to the future, and it may overflow half "
        "precision; fill with float('-inf')")}
    if fill != -1e9:
        mark["title"] = f"Masked scores filled with {fill:g} instead of -inf (masked_fill with a large finite value)"
        mark["symptom"] = ("At every magnitude a trained model reaches, the future gets weight exactly 0 in float64, "
                           f"so outputs and gradients equal the reference's; a query whose allowed scores fall below "
                           f"{fill:g} gives the future its weight.")
    return mark


@detector("mask-includes-diagonal", "mask-keeps-future", "mask-hides-past", "mask-one-token-late",
          "mask-hides-nothing", "mask-wrong")
def mask_shape(f: Findings) -> None:
    """What the masks applied before the softmax hide together is not exactly the future (the strict upper
    triangle); marked on the last of them."""
    uses = _mask_uses(f)
    if uses is None:
        for i, hidden in _fused_masks(f):
            _mark_mask_shape(f, i, hidden, _fused_mask_made_at(f, i))
        return
    applied = uses[0]
    own = [m for m in applied if not _passed_by_us(f, m)]
    hidden, hidden_own = _hidden_by(f, applied), _hidden_by(f, own)
    if hidden is None or not applied:
        return
    future = np.triu(np.ones(hidden.shape, bool), 1)
    if len(own) < len(applied) and hidden_own is not None and hidden_own.any() and not (hidden_own & ~future).any():
        # a mask of the layer's own beside the causal mask mha-check passes, hiding part of the future: ours covers
        # the rest, so together they are right, and the layer's own leaks wherever a caller's mask does not hide the
        # future (checks.causal_leakage calls it with one hiding nothing); its own is what to judge
        _mark_mask_shape(f, own[-1], hidden_own, _made_at(f, own[-1]), beside_ours=True)
        return
    _mark_mask_shape(f, applied[-1], hidden, _made_at(f, applied[-1]))


def _hidden_by(f: Findings, masks: list[int]) -> np.ndarray | None:
    """The score positions (n, n) these mask operations hide together, where any of them can be read."""
    hidden = None
    for m in masks:
        pattern = _mask_pattern(f.namer, f.ops[m])
        if pattern is not None:
            hidden = pattern if hidden is None else (hidden | pattern)
    return hidden


def _passed_by_us(f: Findings, m: int) -> bool:
    """Mask operation `m` applies a mask made by mha-check to call forward (the causal mask passed as `attn_mask`),
    not one of the layer's own."""
    sources = {t["src"] for t in f.ops[m]["in"][1:] if t.get("src") is not None} if f.ops[m]["op"] != "where" \
        else {t["src"] for t in f.ops[m]["in"][:1] if t.get("src") is not None}
    if f.ops[m]["op"] in ADDS:  # either side of an addition may be the mask
        sources = {t["src"] for t in f.ops[m]["in"] if t.get("src") is not None and f.namer.sym(t) not in SCORES_LIKE}
    chain = set(sources)
    for src in sources:
        chain |= f.namer.ancestors(src)
    return any(f.ops[i].get("at") == "mha-check" for i in chain)


def _ours_as_given(f: Findings, op: dict) -> bool:
    """An addition to the scores whose other side is the mask mha-check passes, only carried on (cast, viewed,
    unsqueezed): nothing of the layer's own made it."""
    for t in op["in"]:
        if f.namer.sym(t) in SCORES_LIKE or f.namer.derives_from(t, ("scores",)):
            continue
        src = t.get("src")
        while src is not None and f.ops[src].get("at") != "mha-check" and \
                (f.ops[src]["op"] in PASS_THROUGH or f.ops[src]["op"] in VIEWS) and f.ops[src]["in"]:
            src = f.ops[src]["in"][0].get("src")
        if src is None or f.ops[src].get("at") != "mha-check":
            return False
    return True


def _mark_mask_shape(f: Findings, m: int, hidden: np.ndarray, made: dict | None, beside_ours: bool = False) -> None:
    """Mark operation `m`, which applies a mask hiding `hidden` (n, n), when that is not exactly the future; `made`:
    the line that made the mask wrongly, when it is not `m`'s.  `beside_ours`: the layer's own mask, applied beside
    the causal mask mha-check passes, which covered it: the numbers under that call are the reference's, so the mark
    names its mistake only where causal-leakage's call with a mask hiding nothing finds the same leak
    (`confirmed_by`), and says in its title why the other checks passed."""
    n = f.cfg["n"]
    future = np.triu(np.ones((n, n), bool), 1)
    if np.array_equal(hidden, future):
        return
    right = _right_diagonal((made or f.ops[m]).get("code", ""))  # in the student's own style, as the report's fix
    if np.array_equal(hidden, np.triu(np.ones((n, n), bool), 0)):
        mid, text = "mask-includes-diagonal", ("the mask also hides the diagonal: a token must see itself "
                                               f"(use {right})")
    elif np.array_equal(hidden, ~future):
        mid, text = "mask-keeps-future", "the mask is inverted: it hides the past and shows the future"
    elif np.array_equal(hidden, np.tril(np.ones((n, n), bool), -1)):  # a mistake of its own (mask-hides-past):
        # each token still sees itself, and the last one is not left without any (no NaN)
        mid, text = "mask-hides-past", ("the mask hides the past and shows the future: it marks the tokens before "
                                        "each one (torch.tril(..., diagonal=-1)) where torch.triu(..., diagonal=1) "
                                        "marks the ones after")
    elif np.array_equal(hidden, np.triu(np.ones((n, n), bool), 2)):
        mid, text = "mask-one-token-late", f"the mask lets the next token through: use {right}"
    elif not hidden.any():
        mid, text = "mask-hides-nothing", "the mask hides nothing"
    else:
        mid, text = "mask-wrong", "the mask does not hide exactly the future positions (s > t)"
    rows = "; ".join("".join("x" if v else "." for v in row) for row in hidden)
    mark = {"id": mid, "text": f"{text} (hidden, row by row: {rows}; expected .xx; ..x; ...)"}
    if made is not None:  # the mask is right in forward's use of it, wrong where it was made: that line to change
        mark.update(at=made["at"], code=made["code"],
                    text=f"{mark['text']}; the mask is made wrongly at {made['at']} ({made['code']}), not where it "
                         "is applied")
    if f.ops[m]["op"] in FUSED_MHA:  # no scores of the student's to fill: the remedy is nn.MultiheadAttention's mask
        mark["remedy"] = ("Pass nn.MultiheadAttention the future as its attn_mask: True where a token may NOT attend, "
                          "torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), diagonal=1) for n tokens "
                          "(a tril mask of what may be seen is scaled_dot_product_attention's convention, the "
                          "opposite of nn.MultiheadAttention's; ~tril does the same).")
        if mid == "mask-keeps-future":  # nn.MultiheadAttention's last row, every key hidden, is no NaN under
            # autograd (torch >= 2.5 gives it zero weights): the catalogue's "its output is NaN" is what its
            # no-grad fast path shows alone; the numbers a trained layer gives are a leak and a bias (fixes28)
            mark.update(symptom=(
                "Each token attends only to later tokens, so every output but the last is made from the future; the "
                "last token has nothing left to attend to: nn.MultiheadAttention gives it weights of 0 while "
                "autograd records (as in training), so its output is the output projection's bias alone, whatever "
                "the input, and NaN under torch.no_grad()."), confirmed_by="causal-leakage:leak:inverted")
    if beside_ours and mid == "mask-one-token-late":
        mark.update(title=("Causal mask of the layer's own one diagonal off: each token can see the next one "
                           "wherever the mask passed to forward does not hide it (a padding mask, or none)"),
                    symptom=("Each token also attends to the token right after it wherever the mask passed to "
                             "forward does not hide it, so the model can read the answer it is supposed to predict; "
                             "with the causal mask mha-check passes, the outputs are the reference's."),
                    confirmed_by="causal-leakage:leak:one-future")
    f.mark(m, mark, keep_earlier=True, beside=FILL_MARKS)  # a finite fill on the same masked_fill is a second mistake


_TRIL = re.compile(r"\btril_?\(")
_TRIU = re.compile(r"\btriu_?\(")


def _right_diagonal(code: str) -> str:
    """The right mask in the style of the line that made it: `torch.tril(..., diagonal=0)` (what a token may see)
    where that line builds it with tril and not triu, else `torch.triu(..., diagonal=1)` (what is hidden).  The
    report's fix corrects the student's own line the same way (rewrite's "diagonal"): a student's trial was told
    triu by trace and tril by the report for one tril(ones, diagonal=1)."""
    if _TRIL.search(code or "") and not _TRIU.search(code or ""):
        return "torch.tril(..., diagonal=0)"
    if not _TRIU.search(code or "") and len(re.findall(r">=|<=", code or "")) == 1:  # positions compared (student
        return "a strict comparison, > for >= and < for <="  # trial 21: `torch.where(j >= i, -inf, 0.0)`)
    return "torch.triu(..., diagonal=1)"


def _fused_masks(f: Findings) -> list[tuple[int, np.ndarray]]:
    """(the fused attention, the positions (n, n) its attn_mask hides) for each scaled_dot_product_attention not told
    is_causal whose mask can be read: a float mask hides where it holds -inf, a boolean one where it is False (its
    True means keep).  A student's float mask built with triu(..., 2) let one future token through and the report
    had no line for it: the fused attention's mask was never read."""
    found = []
    for i in f.namer.fused:
        op = f.ops[i]
        mha = op["op"] in FUSED_MHA  # nn.MultiheadAttention: a boolean attn_mask's True means hide, not keep
        if not mha and (op["op"] != "scaled_dot_product_attention" or sdpa_argument(op, "is_causal") == "True"):
            continue
        given = _fused_mask_tensor(op)
        if given is None:
            continue
        pattern = square_pattern(given.get("pattern"), f.cfg["n"])
        if pattern is None:
            continue
        if given.get("dtype") == "bool":
            found.append((i, pattern if mha else ~pattern))
        elif given.get("neginf"):
            found.append((i, pattern))
    return found


def _fused_mask_tensor(op: dict) -> dict | None:
    """The recorded attn_mask tensor of a scaled_dot_product_attention call (or of nn.MultiheadAttention's), or None."""
    raw = op["kwargs"].get("attn_mask") if op["op"] in FUSED_MHA else sdpa_argument(op, "attn_mask")
    if not isinstance(raw, str) or not raw.startswith("<T"):
        return None
    k = int(raw[2:-1])
    return op["in"][k] if k < len(op["in"]) else None


def _fused_mask_made_at(f: Findings, i: int) -> dict | None:
    """{"at", "code"} of the one triu/tril of a constant tensor that decided which positions the fused attention `i`'s
    mask hides, when it marks neither right convention (triu from diagonal 1, tril up to diagonal 0): the line to
    change; else None (the mask is read, not where it went wrong)."""
    given = _fused_mask_tensor(f.ops[i])
    if given is None or given.get("src") is None:
        return None
    shapers = [a for a in f.namer.ancestors(given["src"]) | {given["src"]} if f.ops[a]["op"] in SHAPERS]
    if len(shapers) != 1:
        return None
    op = f.ops[shapers[0]]
    source = op["in"][0] if op["in"] else {}
    if source.get("src") is None or f.ops[source["src"]]["op"] not in FILLED:
        return None
    method = op["args"][:1] == ["<T0>"]
    raw = op["kwargs"].get("diagonal", op["args"][1] if len(op["args"]) > 1 and method else "0")
    diagonal = number(raw)
    right = 1 if op["op"].startswith("triu") else 0
    if f.ops[i]["op"] in FUSED_MHA and not op["op"].startswith("triu"):  # nn.MultiheadAttention hides where True:
        right = None  # tril marks what may be seen: wrong there on any diagonal (a student's tril(ones) kept the
        # future)
    if diagonal is None or diagonal == right or op.get("at", "?") == "?":
        return None
    return {"at": op["at"], "code": op.get("code", "")}


SHAPERS = {"tril", "triu", "tril_", "triu_"}  # what decides which positions a mask marks
FILLED = {"ones", "ones_like", "new_ones", "full", "full_like"}  # a tensor of one nonzero value, for a shaper
CARRIES = PASS_THROUGH | VIEWS | {"eq", "__eq__", "ne", "__ne__", "gt", "__gt__", "lt", "__lt__", "ge", "__ge__",
                                  "le", "__le__", "logical_not", "__invert__", "bitwise_not", "__rsub__", "rsub",
                                  "sub", "__sub__", "mul", "__mul__", "__rmul__"}  # with numbers only: they keep
# which positions a mask marks (or swap marked and unmarked), and choose none


def _mask_side(f: Findings, m: int) -> tuple[list[dict], set[int]]:
    """The inputs of mask operation `m` that are not the scores' side (not derived from the projections, the scores
    or softmax, not x), and every operation they came from: where the mask's positions were chosen."""
    inputs, ops = [], set()
    for t in f.ops[m]["in"]:
        if f.namer.derives_from(t, ("project", "scores", "softmax")) or t.get("name") == "x":
            continue
        inputs.append(t)
        if t.get("src") is not None:
            ops |= f.namer.ancestors(t["src"]) | {t["src"]}
    return inputs, ops


def _made_at(f: Findings, m: int) -> dict | None:
    """{"at", "code"} of the line that made the mask mask operation `m` applies, when the mistake is there and not
    at `m`: the mask marks neither right convention (1 = may look, torch.tril(ones); 1 = hidden,
    torch.triu(ones, 1)), and between where it was made and `m` it is only sliced, cast, viewed, compared with a
    number or inverted.  Made in __init__ (a buffer or tensor attribute: the child records where, `made`, and what
    it marks, `nonzero`) or in forward by one tril/triu of ones.  A right mask used the wrong way round (`tril`
    with `== 1`) is the applying line's mistake: None."""
    inputs, ops = _mask_side(f, m)
    compared = _positions_compared(f, ops, m)
    if compared is not None:
        return compared
    made = [t["made"] for t in inputs if _made_mask(t)]
    shapers = []
    for a in ops:
        op = f.ops[a]
        if op["op"] in SHAPERS:
            shapers.append(a)
        elif op["op"] not in CARRIES and not (op["op"] in FILLED and all(not t["shape"] for t in op["in"])):
            return None  # something else chose the positions: the line that applies the mask is the one to read
        if op["op"] in CARRIES and len([t for t in op["in"] if t["shape"]]) > 1:
            return None
        made += [t["made"] for t in op["in"] if _made_mask(t)]
    if len(made) + len(shapers) != 1:
        return None
    n = f.cfg["n"]
    if made:
        where, marks = made[0], made[0].get("nonzero")
        marks = np.array(marks, bool) if marks is not None else None
    else:
        op = f.ops[shapers[0]]
        source = op["in"][0] if op["in"] else {}
        if source.get("src") is None or f.ops[source["src"]]["op"] not in FILLED:
            return None
        raw = op["kwargs"].get("diagonal", op["args"][1] if len(op["args"]) > 1 else "0")
        diagonal = number(raw)
        if diagonal is None or diagonal != int(diagonal):
            return None
        shape = np.tril if op["op"].startswith("tril") else np.triu
        where, marks = op, shape(np.ones((n, n), bool), int(diagonal))
    if marks is None or marks.shape != (n, n) or np.array_equal(marks, np.tril(np.ones((n, n), bool))) or \
            np.array_equal(marks, np.triu(np.ones((n, n), bool), 1)) or where.get("at", "?") == "?":
        return None
    return {"at": where["at"], "code": where.get("code", "")}


_COMPARE = {"ge": np.greater_equal, "__ge__": np.greater_equal, "gt": np.greater, "__gt__": np.greater,
            "le": np.less_equal, "__le__": np.less_equal, "lt": np.less, "__lt__": np.less}
_POSITIONS = {"arange", "view", "reshape", "unsqueeze", "__getitem__", "to"}  # token positions, as a row or a column


def _positions_compared(f: Findings, ops: set[int], m: int) -> dict | None:
    """{"at", "code"} of a line that compares the token positions (`torch.where(j >= i, -inf, 0.0)`, `j > i` with
    i, j aranges as a column and a row) into the wrong pattern, on another line than the one that applies the mask:
    that comparison is the line to change (student trial 21 was pointed at the line adding the mask to the scores).
    A comparison that marks exactly the future, or exactly what may be seen, is right: None (the mistake is then in
    how it is used)."""
    comparisons = [a for a in ops if f.ops[a]["op"] in _COMPARE]
    if len(comparisons) != 1:
        return None
    op, n = f.ops[comparisons[0]], f.cfg["n"]
    values = []
    for t in op["in"][:2]:
        shape = tuple(t.get("shape") or ())
        made_of = f.namer.ancestors(t["src"]) | {t["src"]} if t.get("src") is not None else set()
        if not made_of or any(f.ops[a]["op"] not in _POSITIONS for a in made_of) or shape not in ((1, n), (n, 1)):
            return None
        values.append(np.arange(n).reshape(shape))
    if len(values) != 2 or op.get("at", "?") in ("?", f.ops[m].get("at")):
        return None
    marks = np.broadcast_to(_COMPARE[op["op"]](values[0], values[1]), (n, n))
    if np.array_equal(marks, np.triu(np.ones((n, n), bool), 1)) or \
            np.array_equal(marks, np.tril(np.ones((n, n), bool))):
        return None
    return {"at": op["at"], "code": op.get("code", "")}


def _made_mask(t: dict) -> bool:
    """A tensor the constructor made that may be a mask: a buffer, a plain attribute or a tensor of a container,
    with axes (a parameter's origin is its layer's line: a weight, learned, is no mask whose pattern was chosen)."""
    return "made" in t and bool(t["shape"]) and t["made"].get("kind") not in WEIGHT_ORIGINS


def _mask_pattern(namer: Namer, op: dict) -> list | None:
    """Which score positions (n, n) this mask operation hides (True = hidden), when it can be read."""
    n = WORKED["n"]
    name, ins = op["op"], op["in"]
    if name in ("masked_fill", "masked_fill_", "__setitem__") and len(ins) >= 2 and "pattern" in ins[1]:
        return square_pattern(ins[1]["pattern"], n)
    if name == "where" and ins and "pattern" in ins[0]:
        cond = square_pattern(ins[0]["pattern"], n)
        if cond is None:
            return None
        side = _where_fill_side(op)  # where(cond, fill, scores) hides cond; where(cond, scores, fill) its inverse
        scores_first = side == 2 if side else len(ins) >= 2 and op["args"][1:2] == ["<T1>"] and (
            namer.sym(ins[1]) in SCORES_LIKE or namer.derives_from(ins[1], ("scores",)))
        return ~cond if scores_first else cond
    if name in ADD_PRODUCTS and ins and ins[0].get("neginf"):  # baddbmm(mask, q, kᵀ): the mask is its input
        return square_pattern(ins[0].get("pattern"), n)
    if name in ADDS:
        for t in ins:
            if t.get("neginf") and "pattern" in t and namer.sym(t) not in SCORES_LIKE:
                return square_pattern(t["pattern"], n)
    return None


def _where_fill_side(op: dict) -> int | None:
    """Which of where's two values (1 or 2, after the condition) is the fill: a number, a tensor of one value, or a
    tensor that is -inf everywhere (`torch.full_like(scores, float("-inf"))`, made from the scores but holding none
    of them: a student's trial had it read as the scores, so a right mask was marked inverted); None when neither
    or both are."""
    sides = []
    for k, raw in enumerate(op["args"][1:3], start=1):
        if not raw.startswith("<T"):
            sides.append(k)
            continue
        i = int(raw[2:-1])
        t = op["in"][i] if i < len(op["in"]) else {}
        if t.get("value") is not None or t.get("neginf") and _everywhere(t.get("pattern")):
            sides.append(k)
    return sides[0] if len(sides) == 1 else None


def _everywhere(pattern) -> bool:
    """Whether a nested list of 0s and 1s holds only 1s (and is not empty)."""
    flat = np.asarray(pattern if pattern is not None else [], dtype=np.int64).ravel()
    return flat.size > 0 and bool(flat.all())


def _fill_value(op: dict) -> float | None:
    """The value a mask operation writes into the hidden scores, when it is a number."""
    name, args, ins = op["op"], op["args"], op["in"]
    if name in ("masked_fill", "masked_fill_", "__setitem__"):
        raw = args[2] if len(args) >= 3 else op["kwargs"].get("value")
        if raw is not None and raw.startswith("<T"):
            k = int(raw[2:-1])
            return number(ins[k].get("value")) if k < len(ins) else None
        return number(raw)
    if name == "where":
        for raw in args[1:3]:
            if raw.startswith("<T"):
                t = ins[int(raw[2:-1])]
                if len(t["shape"]) == 0 and t.get("value") is not None:
                    return number(t["value"])
            else:
                return number(raw)
    return None


TOLD_FILLED = ("the masked scores are filled with", "fill with float('-inf')", "Masked scores filled with")
TOLD_ADDED = ("the mask added to the scores holds", "write float('-inf') where the mask is set",
         "A finite mask added to the scores:")  # a hidden score s becomes s + fill, not fill


def fill_mark(fill: float, at_least: bool = False, added: bool = False) -> dict:
    """A finite fill value.  The catalogued mistakes are told with -10 and -100; another value says itself how
    large its leak is (`title`, `symptom`), so that a fill of 0 is never called "-10.0" or "small", nor +17 "barely
    hidden".  `at_least`: the value was read off the outputs, which any larger fill gives too (the future outweighs
    every past score), so it is told as "fill or more".  `added`: a finite mask added to the scores (CTRL's
    `mask * -1e4`), told in those words.  Shared with harness.engine.fitting, which tells a fill found only by its
    numbers with the same words."""
    how, remedy, title = TOLD_ADDED if added else TOLD_FILLED
    mark_id = "fill-leaks-visibly" if fill > VISIBLE_FILL else "fill-leaks-invisibly"
    weight = f"e^{fill:g} = {math.exp(fill):.2g}" if fill < 700 else f"e^{fill:g}, beyond any float"
    size = ("more than any past token's: each token reads mostly the tokens after it" if fill > 1 else
            "about as much as a past token's, so the future is not hidden" if fill >= -1 else
            "a clearly visible leak" if fill >= -7 else "small, but the outputs differ from the reference"
            if fill > VISIBLE_FILL else "invisible in ordinary outputs, but the gradient shows it" if fill > UNDERFLOW
            else f"exact at ordinary scores, but once real scores fall near {fill:g} (large activations, half "
                 "precision) the future gets a real weight")
    value = f"{fill:.3g} or more" if at_least else f"{fill:g}"
    if fill <= UNDERFLOW:  # e^fill is an exact 0 against a score of 0: the leak is told by the scores it needs
        return _underflowing_fill(mark_id, fill, value, size, added)
    mark = {"id": mark_id, "text": (
        f"{how} {value}, a finite value: after the softmax the future keeps a weight of about "
        f"{weight}{' or more' if at_least else ''} against a score of 0 ({size}); {remedy}")}
    if fill not in CATALOGUED_FILLS or at_least:
        mark["title"] = f"{title} {value} instead of -inf"
        mark["symptom"] = (f"Future tokens keep a weight of about {weight}{' or more' if at_least else ''} relative "
                           f"to a score of 0: {size}; the future influences the past.")
    return mark


def _underflowing_fill(mark_id: str, fill: float, value: str, size: str, added: bool) -> dict:
    """A fill so low that e^fill rounds to 0 against ordinary scores (early GPT-2's -1e4): its leak needs real
    scores near the fill, which causal-leakage's probe gives them."""
    how, remedy, title = TOLD_ADDED if added else TOLD_FILLED
    return {"id": mark_id, "text": (
        f"{how} {value}, a finite value: after the softmax the future's weight e^{fill:g} rounds to 0 while the "
        f"scores are small, {size}; {remedy}"),
        "title": f"{title} {value} instead of -inf",
        "symptom": (f"The future's weight after the softmax, e^{fill:g}, rounds to 0 while the scores are small: "
                    f"{size}, and the future influences the past.")}


@detector("mask-multiplied", "mask-added")
def mask_arithmetic(f: Findings) -> None:
    """A 0/1 mask multiplied into the scores before the softmax (the future's scores become 0, not -inf), or added to
    them with no -inf in it and no number large enough to hide anything (+1 on the future, or on the past)."""
    uses = _mask_uses(f)
    for m in uses[0] if uses else []:
        op = f.ops[m]
        if op["op"] in MULTIPLIES and not _completed(f, m):
            f.mark(m, {"id": "mask-multiplied", "text": (
                "the scores are multiplied by the mask: a hidden score becomes 0, not -inf, and e^0 gives the future "
                "a real weight after the softmax; fill the hidden scores with float('-inf') (masked_fill) instead")},
                keep_earlier=True)
        elif op["op"] in ADDS and not any(t.get("neginf") for t in op["in"]) and not _writes_safe_fill(f, op) \
                and not _ours_as_given(f, op):  # a layer that adds the mask it is given, as it is, takes an
            # additive mask: one of 0s and 1s is mha-check's guess of its convention (GeoV's required
            # attention_mask, called the first way tried since its own tril hides the future whichever way), not
            # the layer's mistake.  `att + (1 - mask)` made its own additive mask, wrongly: marked
            f.mark(m, {"id": "mask-added", "text": (
                "a mask of finite values (0s and 1s) is added to the scores: it shifts some scores by a little and "
                "hides none, so the future keeps a real weight after the softmax; fill the hidden scores with "
                "float('-inf') (masked_fill) instead" + _ones_mark(f, op))}, keep_earlier=True)
    for i in f.namer.fused:  # scaled_dot_product_attention adds a float attn_mask to the scores
        _fused_mask_added(f, i)


def _fused_mask_added(f: Findings, i: int) -> None:
    """A float attn_mask of 0s and 1s given to scaled_dot_product_attention, which adds a float mask to the scores
    (0 keeps, -inf hides) and keeps where a boolean one is True: it hides nothing.  Marked where the mask is taken
    for the call (its own line, in a call written over several lines), with the remedy in SDPA's convention, the
    reverse of masked_fill's: `.bool()` where its 1s mark what a token may see, `== 0` where they mark the future (a
    student's trial got no line, a trace with nothing marked, and the masked_fill advice whose `== 0` made a
    tril mask the future's)."""
    given, values = _sdpa_float_mask(f.ops[i])
    if values is None:
        return
    if not np.isin(values, (0.0, 1.0)).all():
        return
    ones = _ones_are(values.astype(bool), f.cfg["n"])
    if not ones:
        return
    convert = ".bool()" if ones == ONES_ON_ALLOWED else "== 0"
    ones = ones.removeprefix("; its 1s mark ")
    src = given.get("src")
    at = src if src is not None and f.ops[src].get("at", "mha-check") != "mha-check" else i
    f.mark(at, {"id": "mask-added", "title": (
        "A mask of 0s and 1s given to scaled_dot_product_attention as a float attn_mask, which it adds to the "
        "scores: it hides nothing"), "text": (
        f"the attn_mask given to scaled_dot_product_attention is a float mask of 0s and 1s (its 1s mark {ones}); "
        "SDPA adds a float mask to the scores, so it shifts some by 1 and hides none"), "remedy": (
        f"Give scaled_dot_product_attention the mask as booleans, where True means a token may attend: the mask "
        f"with `{convert}` after it (its 1s mark {ones}), or is_causal=True instead of a mask.")}, keep_earlier=True)


def _ones_are(marked: np.ndarray, n: int) -> str:
    """Which positions the 1s of an (n, n) 0/1 mask mark: the future (triu(ones, 1)), what each token may see
    (tril(ones)), or neither ("")."""
    if marked.shape != (n, n):
        return ""
    if np.array_equal(marked, np.triu(np.ones((n, n), bool), 1)):
        return ONES_ON_FUTURE
    return ONES_ON_ALLOWED if np.array_equal(marked, np.tril(np.ones((n, n), bool))) else ""


def _ones_mark(f: Findings, op: dict) -> str:
    """Which positions the 1s of an added 0/1 mask mark, from its first n x n entries as the constructor made them
    (the buffer itself, or the buffer a slice of it was taken from): the future (triu(ones, 1): fill where it is 1)
    or what each token may see (tril(ones): fill where it is 0); "" when neither.  A student told only "masked_fill"
    wrote masked_fill(mask, -inf) on the float mask, which raises (masked_fill takes a boolean mask)."""
    n = f.cfg["n"]
    todo, seen = list(op["in"]), 0
    while todo and seen < 8:
        t, seen = todo.pop(0), seen + 1
        marked = (t.get("made") or {}).get("nonzero")
        if marked and len(marked) == n:
            if ones := _ones_are(np.array(marked, bool), n):
                return ones
        elif t.get("src") is not None and f.ops[t["src"]]["op"] in ("__getitem__", "narrow", "to", "float"):
            todo.extend(f.ops[t["src"]]["in"][:1])  # a slice (or a cast) of the mask: where it was taken from
    return ""


def _completed(f: Findings, m: int) -> bool:
    """The product is completed by a later operation with another mask-made operand before the softmax: GPT-2's
    `w * b - 1e4 * (1 - b)`, a fill of -1e4 written as arithmetic (a fill, judged as one), not a bare product."""
    for later in f.ops[m + 1:]:
        ins = later["in"]
        if later.get("raised") or not any(t.get("src") is not None and
                                           (t["src"] == m or m in f.namer.ancestors(t["src"])) for t in ins):
            continue
        if any(t.get("src") != m and (t.get("src") is None or m not in f.namer.ancestors(t["src"])) and
               f.namer.derives_from(t, ("mask",)) for t in ins):
            return True
    return False


def _writes_safe_fill(f: Findings, op: dict) -> bool:
    """A tensor added to the scores was made with a number at or below SAFE_FILL (`torch.where(mask, -1e9, 0)`): an
    additive finite mask, additive-finite-mask's, not a 0/1 mask."""
    for t in op["in"]:
        if t.get("src") is None or f.namer.sym(t) in SCORES_LIKE:
            continue
        for a in f.namer.ancestors(t["src"]) | {t["src"]}:
            fill = _written_number(f.ops[a])
            if fill is not None and fill <= SAFE_FILL:
                return True
    return False


MOVES = {"to", "cuda", "type_as", "new_ones", "new_zeros", "new_full", "new_tensor"}  # onto a tensor's device


@detector("mask-made-without-device")
def mask_device(f: Findings) -> None:
    """A mask made in forward from a new tensor (torch.ones(n, n)...) with no device= and never moved: it lives on
    the CPU whatever device the scores are on (the trace runs on the CPU, so only the call can tell)."""
    uses = _mask_uses(f)
    if uses is None:
        return
    for m in [i for group in uses for i in group]:
        before: set[int] = set()  # what made the mask itself, not the scores it is applied to
        for k, t in enumerate(f.ops[m]["in"]):
            added = k == 0 and f.ops[m]["op"] in ADD_PRODUCTS  # baddbmm's input: the mask, expanded to the scores
            if t.get("src") is not None and (added or f.namer.sym(t) not in SCORES_LIKE) and \
                    not f.namer.derives_from(t, ("project", "scores", "softmax")):
                before |= f.namer.ancestors(t["src"]) | {t["src"]}
        moved = set()
        for a in before:
            if f.ops[a]["op"] in MOVES:
                moved |= f.namer.ancestors(a)
        for c in sorted(before):
            op = f.ops[c]
            if op["op"] in CREATORS and not op["in"] and "device" not in op["kwargs"] and c not in moved and \
                    (op.get("out") or {}).get("shape"):  # a 0-d fill value may stay on the CPU
                f.mark(c, {"id": "mask-made-without-device", "text": (
                    f"the mask is made here by {op['op']}(...) without device=: it stays on the CPU when the layer "
                    "runs on a GPU; pass device= the scores' device, or register the mask as a buffer in __init__")},
                    keep_earlier=True)
                return


@detector("mask-kept-as-attribute")
def mask_kept_as_attribute(f: Findings) -> None:
    """A mask kept as a plain tensor attribute (`self.mask = torch.triu(...)` in __init__, not register_buffer): it
    does not follow .to(device) and state_dict() misses it.  Marked at the operation that applies it, at the line
    that made it (the child notes where the constructor made each tensor attribute, and its path), the line to
    change.  `f.cfg["plain"]`: the module's plain tensor attributes, when the recording passed them."""
    plain = set(f.cfg.get("plain") or ())
    uses = _mask_uses(f) if plain else None
    if uses is None:
        return
    for m in [i for group in uses for i in group]:
        for made in _mask_side_origins(f, m):
            if made.get("path") in plain:
                mark = {"id": "mask-kept-as-attribute", "text": (
                    f"the mask {made['path']} is a plain attribute of the module, not a buffer: model.to(device) "
                    f"leaves it behind and state_dict() misses it; {MADE_A_BUFFER}")}
                if made.get("at") not in (None, "?"):
                    mark.update(at=made["at"], code=made.get("code", ""))
                f.mark(m, mark, keep_earlier=True)
                return


@detector("mask-kept-in-container")
def mask_kept_in_container(f: Findings) -> None:
    """A mask taken from a plain dict, list or tuple the constructor filled (`self.masks = {t: torch.triu(...) for t
    in ...}`): nn.Module registers none of its tensors, so model.to(device) leaves them on the CPU and state_dict()
    misses them.  Marked at the operation that applies it, at the line that made it (the child notes where the
    constructor made each tensor of a plain container, and its path, `masks[3]`), the line to change."""
    uses = _mask_uses(f)
    if uses is None:
        return
    for m in [i for group in uses for i in group]:
        for made in _mask_side_origins(f, m):
            if made.get("kind") == "container" and made.get("at") not in (None, "?"):
                container = made["path"].split("[", 1)[0]
                f.mark(m, {"id": "mask-kept-in-container", "text": (
                    f"the mask {made['path']} is kept in self.{container}, a plain container the module does not "
                    "register: model.to(device) leaves its tensors on the CPU and state_dict() misses them; make "
                    "one mask of the longest length in __init__, register it with self.register_buffer(name, "
                    "tensor), and cut it to the scores' size in forward"),
                    "at": made["at"], "code": made.get("code", "")}, keep_earlier=True)
                return


@detector("mask-made-too-short")
def mask_made_too_short(f: Findings) -> None:
    """A mask the constructor made for fewer positions than the context length it was given (`torch.ones(8, 8)`
    whatever `context_length` says): the worked example's 3 tokens fit in it, and the same forward recorded with as
    many tokens as the context length (`f.cfg["long"]`, harness.engine.trace.drive) raised where that mask meets the
    scores.  Marked at the operation that applies it, at the line that made it (the line to change)."""
    long, uses = f.cfg.get("long") or {}, _mask_uses(f)
    raised = next((op for op in long.get("ops", ()) if op.get("raised")), None)
    if raised is None or not uses:
        return
    short = _short_made(long["ops"], raised, long["n"])
    if short is None:
        return
    made, size = short
    for m in [i for group in uses for i in group]:
        if f.ops[m].get("at") == raised.get("at") and any(o.get("at") == made.get("at") and
                                                         o.get("path") == made.get("path")
                                                         for o in _mask_side_origins(f, m)):
            f.mark(m, {"id": "mask-made-too-short", "text": (
                f"the mask {made.get('path', '')} is made for {size} positions, fewer than the context length the "
                f"constructor was given ({long['n']}): with {long['n']} tokens this line raised "
                f"{raised['raised'].split(' (at ')[0]}; build the mask for the context length and cut it to the "
                "sequence in forward"), "at": made["at"], "code": made.get("code", ""),
                **_too_short_words(size)}, keep_earlier=True)
            return


def _too_short_words(size: int) -> dict:
    """The catalogue tells mask-size-fixed with 8 positions; a mask of another size says its own."""
    if size == 8:
        return {}
    return {"title": f"Mask built for a fixed {size} positions instead of context_length: longer sequences fail",
            "symptom": (f"Short tests pass; any sequence longer than {size} tokens raises 'The size of tensor a "
                        f"({size}) must match the size of tensor b (n)' at the line that applies the mask.")}


def _short_made(ops: list[dict], op: dict, n: int) -> tuple[dict, int] | None:
    """(where it was made, its size) of the one square tensor the constructor made, fewer than `n` positions wide,
    that operation `op` of a forward over `n` tokens read, directly or through the operations that made its
    inputs, while another of its inputs holds (n, n) scores: the mask too short for the sequence."""
    if not any(list((t.get("shape") or [])[-2:]) == [n, n] for t in op["in"]):
        return None
    found, seen, todo = {}, set(), list(op["in"])
    while todo:
        t = todo.pop()
        shape = t.get("shape") or []
        if "made" in t and t["made"].get("kind") != "parameter" and len(shape) >= 2 and shape[-1] == shape[-2] < n \
                and t["made"].get("at") not in (None, "?"):
            found[(t["made"]["at"], t["made"].get("path"))] = (t["made"], shape[-1])
        src = t.get("src")
        if src is not None and src not in seen and src < len(ops):
            seen.add(src)
            todo += ops[src]["in"]
    return next(iter(found.values())) if len(found) == 1 else None


def _mask_side_origins(f: Findings, m: int) -> list[dict]:
    """Where the constructor made the module tensors that operation `m` takes its mask from (not the scores'
    side): the `made` of each, directly or through the operations that sliced, cast or compared it."""
    inputs, ops = _mask_side(f, m)
    found = [t["made"] for t in inputs if "made" in t and t["made"].get("kind") not in WEIGHT_ORIGINS]
    for a in sorted(ops):
        found += [t["made"] for t in f.ops[a]["in"] if "made" in t and t["made"].get("kind") not in WEIGHT_ORIGINS]
    return found


@detector("mask-only-in-eval")
def mask_only_in_eval(f: Findings) -> None:
    """The causal mask applied in eval mode only: the same forward recorded in training mode (`f.cfg["training"]`,
    harness.engine.trace.drive) computes a softmax and applies no mask at all (no masking operation, no fused
    attention), so in training every token sees the future.  Told at the line where the two modes part (`if not
    self.training:`): the last line of forward, before the mask's, that training ran too, read from the lines each
    mode ran (`f.cfg["lines"]`, the training's)."""
    training = f.cfg.get("training") or {}
    lines, trained = f.cfg.get("lines") or [], {line["at"] for line in training.get("lines") or ()}
    uses = _mask_uses(f)
    if not uses or not lines or not trained or f.fused_sdpa or f.fused_mha:
        return
    masks = [i for group in uses for i in group]
    if not masks or not _unmasked(training["ops"], f.cfg):
        return
    first = f.ops[masks[0]]
    at = first.get("call_at", first.get("at"))
    runs = [line["at"] for line in lines]
    if at not in runs:
        return
    parting = next((lines[j] for j in range(runs.index(at), -1, -1) if runs[j] in trained), None)
    if parting is None:
        return
    f.mark(masks[0], {"id": "mask-only-in-eval", "text": (
        f"the causal mask is applied only in eval mode: in training mode forward leaves {parting['at']} another way "
        "and applies no mask, so every token sees the future while the model learns (and learns to rely on it); "
        "apply the mask in every mode: only dropout depends on self.training"),
        "at": parting["at"], "code": parting.get("code", "")}, keep_earlier=True)


def _unmasked(ops: list[dict], cfg: dict) -> bool:
    """A forward (recorded in training mode) that computes a softmax and applies no mask: no masking operation on the
    scores, no fused attention (which may be causal by itself)."""
    namer = Namer(ops, cfg)
    namer.run()
    return "softmax" in namer.labels and not namer.mask_ops and not namer.fused


def _trained(f: Findings, i: int) -> dict | None:
    """Operation `i` of the forward recorded in training mode (`f.cfg["training"]`), where that forward took the same
    steps up to it (the same operation at the same line); None otherwise: the two modes cannot be set side by side."""
    ops = (f.cfg.get("training") or {}).get("ops") or []
    if i >= len(ops) or any((a["op"], a.get("at")) != (b["op"], b.get("at")) for a, b in zip(ops[:i + 1], f.ops)):
        return None
    return ops[i]


@detector("dropout-before-softmax")
def dropout_before_softmax(f: Findings) -> None:
    """Dropout applied to the masked scores, before the softmax: in eval mode it is the identity and the layer is
    right; in the forward recorded in training mode it multiplies some -inf scores by 0, and its output holds NaN
    (0 · -inf), which the softmax spreads over the row.  Marked only where the training forward shows that NaN."""
    uses = _mask_uses(f)
    if not uses or not uses[0]:
        return
    before_softmax: set[int] = set()
    for s in f.named("softmax"):
        before_softmax |= f.namer.ancestors(s)
    for op in f.ops:
        i, ins = op["i"], op["in"]
        if op["op"] not in DROPOUTS or i not in before_softmax or not ins or not ins[0].get("neginf") or \
                ins[0].get("src") is None or not (set(uses[0]) & (f.namer.ancestors(ins[0]["src"]) | {ins[0]["src"]})):
            continue
        trained = _trained(f, i)
        if trained is None or not trained["in"] or not (trained.get("out") or {}).get("nan") or \
                trained["in"][0].get("nan"):  # NaN made here, not brought in
            continue
        f.mark(i, {"id": "dropout-before-softmax", "text": (
            "dropout is applied to the masked scores, before the softmax: in training mode it multiplies some of "
            "the -inf scores by 0, and 0 · -inf is NaN (the forward recorded in training mode has NaN here), so "
            "those rows of weights are NaN; apply dropout to the weights the softmax returns")}, keep_earlier=True)
        return


@detector("mask-dropped-out")
def mask_dropped_out(f: Findings) -> None:
    """Dropout applied to the causal mask itself: in eval mode it is the identity and the mask hides the future; in
    the forward recorded in training mode the same masking operation leaves some future positions unhidden (a
    dropped 1 of a 0/1 mask reads as 0).  Marked at the dropout, the line to change, only where the training
    forward shows a future position the eval forward hid."""
    uses = _mask_uses(f)
    n = f.cfg["n"]
    future = np.triu(np.ones((n, n), bool), 1)
    for m in uses[0] if uses else []:
        _, side = _mask_side(f, m)
        dropped = sorted(a for a in side if f.ops[a]["op"] in DROPOUTS)
        hidden, trained = _mask_pattern(f.namer, f.ops[m]), _trained(f, m)
        if len(dropped) != 1 or hidden is None or trained is None or not (hidden & future).any():
            continue
        shown = _hidden_anywhere(trained, n)
        if shown is None or not (hidden & future & ~shown).any():
            continue
        op = f.ops[dropped[0]]
        f.mark(m, {"id": "mask-dropped-out", "text": (
            f"the mask goes through {op['op']} before it is applied: in eval mode that is the identity, but in "
            "training mode it zeroes some entries of the mask, and the forward recorded in training mode leaves "
            "future positions unhidden here; apply the mask itself, and dropout to the weights after the softmax"),
            **({"at": op["at"], "code": op.get("code", "")} if op.get("at") not in (None, "?") else {})},
            keep_earlier=True)
        return


def _hidden_anywhere(op: dict, n: int) -> np.ndarray | None:
    """The (n, n) positions a masked_fill of the training forward hides in every slice of its mask (a position
    hidden in one head and shown in another is shown), or None when its mask cannot be read."""
    if op["op"] not in ("masked_fill", "masked_fill_") or len(op["in"]) < 2 or "pattern" not in op["in"][1]:
        return None
    a = np.asarray(op["in"][1]["pattern"], dtype=bool)
    if a.ndim < 2 or a.shape[-2:] != (n, n):
        return None
    return a.reshape(-1, n, n).all(axis=0)


@detector("additive-finite-mask")
def additive_finite_mask(f: Findings) -> None:
    """A mask added to the scores whose hidden entries are a finite number at or below PROBED_FILL (`torch.where(mask,
    -1e9, 0)`, `(1 - tril) * -1e9`): exact at every realistic magnitude, but not -inf (the lesson's rule; it
    overflows half precision).  Marked where the number is written, the line to change.  One between PROBED_FILL
    and SAFE_FILL (CTRL's -1e4) leaks at realistic magnitudes: finite_fill marks it, as the fill it is."""
    added = _additive_fill(f)
    if added is not None and added[1] <= PROBED_FILL:  # (above it, a fill that leaks: finite_fill's)
        f.mark(added[0], {"id": "additive-finite-mask", "text": (
            f"the mask added to the scores hides the future with {added[1]:g}, a finite number, not -inf: exact "
            "while every score stays far below it, but a larger score gets through and it overflows half "
            "precision; write float('-inf') where the mask is set")}, keep_earlier=True)


def _additive_fill(f: Findings) -> tuple[int, float] | None:
    """(where the number is written, the number) of the first mask added to the scores before a softmax whose
    hidden entries are a finite number at or below SAFE_FILL, or None."""
    uses = _mask_uses(f)
    for m in uses[0] if uses else []:
        op = f.ops[m]
        if op["op"] not in ADDS or any(t.get("neginf") for t in op["in"]):
            continue
        for t in op["in"]:
            if t.get("src") is None or f.namer.sym(t) in SCORES_LIKE:
                continue
            for a in sorted(f.namer.ancestors(t["src"]) | {t["src"]}, reverse=True):
                fill = _written_number(f.ops[a])
                if fill is not None and -1e300 < fill <= SAFE_FILL:  # float64's own minimum (finfo(dtype).min,
                    # traced in float64) outweighs any score; -1e9 or float32's minimum does not
                    return a, fill
    return None


def _written_number(op: dict) -> float | None:
    """A number an operation writes or multiplies by (where's branches, masked_fill's value, a product's factor,
    full's fill value), when one of its arguments is a plain number."""
    if op["op"] in ("where", "masked_fill", "masked_fill_"):
        return _fill_value(op)
    if op["op"] in ("mul", "__mul__", "__rmul__", "full"):
        numbers = [number(a) for a in op["args"] if not str(a).startswith("<T")]
        numbers = [v for v in numbers if v is not None and v < 0]
        return numbers[0] if len(numbers) == 1 else None
    return None



ROW_MAXES = ("amax", "max")  # a row maximum (torch.max(...).values's operation is max's own)
SUBTRACTS = ("sub", "__sub__")
EXPS = ("exp", "exp_")
SMALL_LEAK = "causal-leakage:leak:small-leak"  # the finding a finite fill shows too (diagnosis: no fill is named)


@detector("exp-before-mask")
def exp_before_mask(f: Findings) -> None:
    """A softmax written by hand (exp, the future's exponentials zeroed by a mask, divided by their sum) that takes
    the exponentials of the scores before any mask hides the future: exp(s) * keep / sum, or exp(s - s.amax(-1)) *
    keep / sum.  The mask cancels the future's exponentials, so ordinary outputs are the reference's, but the
    future's score is still in the arithmetic: without a row maximum, a future score large enough makes its
    exponential inf, and inf times the mask's 0 is NaN; with a row maximum taken over every key, a future score far
    above the past ones underflows every allowed exponential to 0 (0/0), and by rounding the future reaches the
    past.  Either is the small leak a finite fill shows too (the mark says so: `explains`, read by the diagnosis,
    which then names no fill).  Marked at the row maximum where there is one, else at the exponential: the line to
    change.  A forward with a softmax of its own is not this detector's (its mask is judged where it is applied)."""
    if f.named("softmax") or f.fused_sdpa or f.fused_mha:
        return
    masks = [m for m in f.namer.mask_ops if not _nan_guard(f, m)]
    for op in f.ops:
        ins = op["in"]
        if op["op"] not in EXPS or not ins or ins[0].get("src") is None or \
                not f.namer.derives_from(ins[0], ("scores",)):
            continue
        made = f.namer.ancestors(op["i"])
        if set(masks) & made or not any(op["i"] in f.namer.ancestors(m) for m in masks):
            continue  # the exponentials of scores already masked, or no mask after them: not this pattern
        top = _row_max(f, f.ops[ins[0]["src"]])
        at = top if top is not None else op["i"]
        f.mark(at, {"id": "exp-before-mask", "explains": [SMALL_LEAK], "text": (
            "the softmax is written by hand and the mask is applied to the exponentials, not to the scores: "
            + ("the row maximum subtracted here is taken over every key, the future's too, so a future score far "
               "above the past ones (about 100 in float32, 17 in float16) underflows every allowed weight to 0 "
               "(0/0 is NaN), and by rounding the future reaches the past" if top is not None else
               "a future score large enough (about 89 in float32, 11 in float16) makes its exponential inf here, "
               "and inf times the mask's 0 is NaN in every earlier row") +
            "; the outputs are otherwise right. Hide the future in the scores first, "
            "scores.masked_fill(mask, float('-inf')), then torch.softmax(scores, dim=-1)")}, keep_earlier=True)
        return


def _row_max(f: Findings, sub: dict) -> int | None:
    """The operation of the row maximum (over the keys, the last axis) that `sub` subtracts from the very scores it
    takes it of (`s - s.amax(-1, keepdim=True)`), or None."""
    top = sub["in"][1].get("src") if sub["op"] in SUBTRACTS and len(sub["in"]) == 2 else None
    if top is None or f.ops[top]["op"] not in ROW_MAXES or not f.ops[top]["in"]:
        return None
    row = f.ops[top]["in"][0]
    raw = f.ops[top]["kwargs"].get("dim", f.ops[top]["args"][1] if len(f.ops[top]["args"]) >= 2 else None)
    dim, ndim = number(raw), len(row.get("shape") or ())
    same = row.get("src") is not None and row.get("src") == sub["in"][0].get("src")
    return top if same and dim is not None and ndim and int(dim) % ndim == ndim - 1 else None
