"""Detectors of the scores on their way to the weights: the softmax's axis, the weights made without autograd, a
fused attention's own mask, and the scores' total scale (the lesson divides them by sqrt(dh), once)."""
from __future__ import annotations

import math
import re

import numpy as np

from harness.engine.trace.registry import Findings, detector
from harness.engine.trace.vocabulary import (DROPOUTS, FUSED_MHA, MATMULS, MULTIPLIES, SCORES_LIKE, is_weight,
                                             number, sdpa_argument, square_pattern)


@detector("softmax-not-last-axis")
def softmax_axis(f: Findings) -> None:
    """A softmax over another axis than the last (the keys'), where the trace knows the keys' axis: scores in one of
    the lesson's layouts ((B, H, n, n), (B·H, n, n), (B, n, n)), whose keys are last, or any axis whose size is not
    n, which holds no keys in any layout.  Scores of a layout of the student's own (an einsum to (B, n, n, H), heads
    last) may keep the keys on another axis of size n: the numbers judge that softmax, not the trace."""
    for s in f.named("softmax"):
        op = f.ops[s]
        raw = op["kwargs"].get("dim", op["args"][1] if len(op["args"]) >= 2 else None)
        shape = op["in"][0]["shape"] if op["in"] else []
        dim, ndim = number(raw), len(shape)
        if dim is None or not ndim or int(dim) % ndim == ndim - 1:
            continue
        if f.namer.sym(op["in"][0]) in SCORES_LIKE or shape[int(dim) % ndim] != f.cfg["n"]:
            f.mark(s, _softmax_axis(int(dim), ndim))


@detector("weights-without-grad")
def weights_without_grad(f: Findings) -> None:
    """The attention weights computed with autograd turned off by the student's code (`with torch.no_grad():` around
    the softmax; the trace itself runs with autograd on): the output is right, but no gradient flows back through
    the weights to the scores, so the query and key projections never learn.  Marked at the softmax."""
    for s in f.named("softmax"):
        if f.ops[s].get("no_grad"):
            f.mark(s, {"id": "weights-without-grad", "text": (
                "the attention weights are computed here with autograd turned off (inside torch.no_grad()): the "
                "output is right, but no gradient reaches the scores, so W_q and W_k get none and never learn; "
                "compute the weights outside any torch.no_grad() block")}, keep_earlier=True)
            return
    for i, mark in _detached(f):
        f.mark(i, mark, keep_earlier=True)


DETACHES = {"detach", "detach_"}
ROLE_WORDS = {"wq": "query", "wk": "key", "wv": "value", "wo": "output"}  # as checks.parameters_used words them
ROLE_NAMES = {"wq": "W_q", "wk": "W_k", "wv": "W_v", "wo": "W_o"}
CUT_STEPS = ("project", "split", "move heads forward", "scores", "scale", "mask", "softmax")  # a tensor on the way
# from a projection to the attention weights


def _detached(f: Findings) -> list[tuple[int, dict]]:
    """Each `.detach()` on the way to the output of a weight, a projection's output, the scores or the attention
    weights (a student's trial: `k = self.W_k(x).detach()`, `F.linear(x, self.W_q.weight.detach())`): the output is
    right, but no gradient reaches the parameters before it, as under torch.no_grad().  Not a reduction detached
    (a row's maximum subtracted for a stable softmax, `sim.amax(-1, keepdim=True).detach()`, whose gradient is
    zero whatever), nor a tensor kept aside (attention weights stored for a plot) that the output never uses.
    Where the parameters have a proven reading (`f.cfg["roles"]`), the mark says which projections lose their
    gradient, in the words parameters-used's finding uses (`confirmed_by`): the line names the mistake only where
    that check finds exactly those projections without a gradient."""
    out = f.output.get("src")
    if not isinstance(out, int) or not 0 <= out < len(f.ops):
        return []
    reach = f.namer.ancestors(out) | {out}
    roles = f.cfg.get("roles") or {}
    found = []
    for op in f.ops:
        if op["op"] not in DETACHES or op["i"] not in reach or op.get("raised") or not op["in"]:
            continue
        t = op["in"][0]
        shape = t.get("shape") or []
        if not shape or shape[-1] == 1:
            continue
        if is_weight(t):
            if (t.get("made") or {}).get("kind") != "parameter" and not any(
                    t["name"] in _parameters(reading) for reading in roles.values()):
                continue  # a buffer (a mask) detached: no gradient was ever its to lose
            cut = {t["name"]}
            what = f"the weight {t['name']}"
        elif t.get("src") is not None and f.namer.label_of(t) in CUT_STEPS and f.namer.derives_from(t, ("project",)):
            cut = {u["name"] for a in f.namer.ancestors(t["src"]) | {t["src"]} for u in f.ops[a]["in"] if is_weight(u)}
            label = f.namer.label_of(t)
            what = ("the attention weights" if label == "softmax" else "the scores" if label in (
                "scores", "scale", "mask") else "a projection's output")
        else:
            continue
        lost = _lost(roles, cut)
        if lost:
            words = [ROLE_WORDS[r] for r in lost]
            projections = f"the {' and '.join(words)} projection{'s' if len(lost) > 1 else ''}"
            if what == "a projection's output":
                what = f"{projections}' outputs" if len(lost) > 1 else f"{projections}'s output"
            names, gets = " and ".join(ROLE_NAMES[r] for r in lost), "gets" if len(lost) == 1 else "get"
            read = ", ".join(roles[r] for r in lost)
            found.append((op["i"], {
                "id": "weights-without-grad",
                "text": (f"this .detach() cuts {what} out of the backward pass: the output is right, but {names} "
                         f"({read}) {gets} no gradient and never learn{'s' if len(lost) == 1 else ''}; remove "
                         ".detach()"),
                "title": f"{what[0].upper()}{what[1:]} detached (.detach()): forward right, {names} {gets} no gradient",
                "symptom": (f"The forward output is exactly right, but .detach() cuts {what} out of the backward "
                            f"pass: {names} {gets} no gradient and never learn{'s' if len(lost) == 1 else ''}"
                            + (", and the input gradient is incomplete." if not is_weight(t) else ".")),
                "confirmed_by": f"parameters-used:unused {' and '.join(words)} projection"
                                f"{'s' if len(lost) > 1 else ''}"}))
        else:  # no proven reading, or projections sharing one parameter (a fused c_attn): which lose what is unknown
            found.append((op["i"], {
                "id": "weights-without-grad",
                "text": (f"this .detach() cuts {what} out of the backward pass: the output is right, but the "
                         "parameters before it get no gradient through it and do not learn as they should; remove "
                         ".detach()"),
                "title": f"{what[0].upper()}{what[1:]} detached (.detach()): forward right, gradients wrong",
                "symptom": (f"The forward output is exactly right, but .detach() cuts {what} out of the backward "
                            "pass: the parameters before it get no gradient through it.")}))
    return found


def _lost(roles: dict[str, str], cut: set[str]) -> list[str]:
    """The projections (wq, wk, wv, wo) all of whose parameters are in `cut` and are no other projection's (a fused
    c_attn holds the three: cut there, which rows lose their gradient is not read off the names)."""
    readings = {r: _parameters(roles[r]) for r in ROLE_WORDS if r in roles}
    lost = []
    for r, params in readings.items():
        others = set().union(*(p for o, p in readings.items() if o != r))
        if params <= cut and not params & others:
            lost.append(r)
    return lost


_SLICE = re.compile(r"\[[^\]]*\]")


def _parameters(reading: str) -> set[str]:
    """The parameter names a role's reading is made of (`c_attn.weight.T[0:8]` -> {c_attn.weight}), as
    checks.parameters_used reads them."""
    out = set()
    for piece in reading.split("+"):
        name = _SLICE.sub("", piece.strip())
        out.add(name[:-2] if name.endswith(".T") else name)
    return out


MHA_MASK_REMEDY = ("Pass the causal mask to your nn.MultiheadAttention call: attn_mask=torch.triu(torch.ones(n, n, "
                   "dtype=torch.bool, device=x.device), diagonal=1) for n tokens (True = may not attend; a buffer made "
                   "so in __init__ and cut to [:n, :n] does the same). is_causal=True alone raises: it only tells "
                   "PyTorch that the attn_mask given is causal.")  # no-mask's remedy speaks of masked_fill, which
# a layer that wraps nn.MultiheadAttention never calls (issue 28)


@detector("sdpa-without-causal", "sdpa-mask-keeps-future")
def fused_attention_mask(f: Findings) -> None:
    """A fused attention called with no causal mask, or with a boolean mask that keeps the future (True = keep)."""
    n = f.cfg["n"]
    for i in f.namer.fused:
        op = f.ops[i]
        causal = sdpa_argument(op, "is_causal") == "True"
        mask_arg = sdpa_argument(op, "attn_mask")
        if op["op"] in FUSED_MHA:
            mask_arg = op["kwargs"].get("attn_mask")
        if not causal and (mask_arg is None or mask_arg == "None") and op["op"] in FUSED_MHA:
            f.mark(i, {"id": "sdpa-without-causal", "text": (
                "nn.MultiheadAttention is called without an attn_mask: every token sees the future; pass the causal "
                "mask as attn_mask (is_causal=True alone raises: it only says that attn_mask is causal)"),
                "remedy": MHA_MASK_REMEDY})
        elif not causal and (mask_arg is None or mask_arg == "None"):
            f.mark(i, {"id": "sdpa-without-causal", "text": (
                "the fused attention is called without is_causal=True or an attn_mask: every token sees the "
                "future")})
        elif not causal and isinstance(mask_arg, str) and mask_arg.startswith("<T"):
            given = op["in"][int(mask_arg[2:-1])]
            keep = square_pattern(given.get("pattern"), n) if given.get("dtype") == "bool" else None
            if keep is not None and np.array_equal(keep, np.triu(np.ones((n, n), bool), 1)):
                f.mark(i, {"id": "sdpa-mask-keeps-future", "text": (
                    "a boolean attn_mask of scaled_dot_product_attention says which positions to KEEP; this one is "
                    "True above the diagonal, so every token attends to the future only; pass is_causal=True or "
                    "attn_mask=~mask")})


@detector("scores-not-scaled", "scaled-by-dh", "scaled-by-sqrt-d", "scaled-by-sqrt-heads", "scaled-by-sqrt-n",
          "wrong-scale", "scaled-after-softmax")
def scale(f: Findings) -> None:
    """The product of the numbers the scores are multiplied by on the way to each softmax (q and k may be scaled
    apart; a fused attention scales by its own) is not 1/sqrt(dh), dh the width of the queries dotted with the keys
    (a layer of full-width heads, d each, rightly divides by sqrt(d): its mistake is the heads' width, not the scale,
    and a mark here would name the wrong one).  Scores scaled by a tensor of the layer's own (a learned temperature)
    are not judged: reference-match tells whether its value is the lesson's."""
    softmaxes = f.named("softmax")
    for target in (softmaxes or ([f.namer.fused[0]] if f.fused_sdpa else [])):
        ancestors = f.namer.ancestors(target)
        if any(i in ancestors for i in f.namer.unread_scales):  # a learned scale: its value is the numbers' to judge
            continue
        dh = _queries_width(f, ancestors, f.cfg["d"] // f.cfg["heads"])
        factors = [(i, k) for i, k in f.namer.scale_factors if i in ancestors]
        total = math.prod(k for _, k in factors) * (_fused_scale(f.ops[target], dh) if target in f.namer.fused
                                                     else 1.0)
        want = 1 / math.sqrt(dh)
        if not math.isclose(total, want, rel_tol=1e-6) and _scaled_after(f, target, total, want):
            continue
        if not math.isclose(total, want, rel_tol=1e-6):
            divisor = 1 / total if total else float("inf")
            if math.isclose(total, 1.0):
                mid, text = "scores-not-scaled", "the scores are never scaled"
            elif math.isclose(divisor, dh):
                mid, text = "scaled-by-dh", f"the scores are divided by dh = {dh}, not by sqrt(dh)"
            elif math.isclose(divisor, math.sqrt(f.cfg["d"])) and dh != f.cfg["d"]:
                mid, text = "scaled-by-sqrt-d", (f"the scores are divided by sqrt(d) = {divisor:.4g} (the full "
                                                "width), not by sqrt(dh) (the head width)")
            elif math.isclose(divisor, math.sqrt(f.cfg["heads"])) and f.cfg["heads"] > 1:
                mid, text = "scaled-by-sqrt-heads", (f"the scores are divided by sqrt(H) = {divisor:.4g} (the number "
                                                    "of heads), not by sqrt(dh) (the head width)")
            elif math.isclose(divisor, math.sqrt(f.cfg["n"])) and f.cfg["n"] != dh:
                mid, text = "scaled-by-sqrt-n", (f"the scores are divided by sqrt(n) = {divisor:.4g} (the number "
                                                "of tokens), not by sqrt(dh) (the head width)")
            else:
                mid, text = "wrong-scale", f"the scores are multiplied by {total:.4g} in all (divided by {divisor:.4g})"
            text += f"; the lesson divides by sqrt(dh) = sqrt({dh}) = {math.sqrt(dh):.4g}"
            twice = _scaled_again(f, factors, want)
            if twice is not None:
                extra, kept = twice
                where = f.ops[kept].get("at") or "?"
                f.mark(extra, {"id": mid, "text": (
                    f"{text}: the scores are scaled twice, here and again at step {kept + 1} ({where}), which "
                    "alone divides by sqrt(dh)"), "remedy": (
                    f"Scale the scores once: delete this scaling, since the one at {where} already divides them "
                    "by sqrt(dh)")}, keep_earlier=True)
                continue
            at = factors[-1][0] if factors else _scores_product(f, ancestors, target)
            made = f.ops[_scores_product(f, ancestors, target)]
            mark = {"id": mid, "text": text}
            if made.get("code") and made.get("at") != f.ops[at].get("at"):  # scaled on a line of its own: where the
                mark["scores_code"] = made["code"]  # scores were made names the queries, for the fix in the
                # student's names (harness.engine.rewrite: `scores / math.sqrt(q.size(-1))`)
            f.mark(at, mark, keep_earlier=True)


def _scaled_after(f: Findings, target: int, total: float, want: float) -> bool:
    """Marks, and says so, where the softmax's weights are multiplied by what its scores lacked (`softmax(scores)
    * self.scale`: the scores unscaled, the weights of each row summing to 1/sqrt(dh)); student trial 20's layer
    was told its scores were never scaled, and the fix that said so, pasted, scaled them twice."""
    after = [(i, k) for i, k in f.namer.weights_factors if target in f.namer.ancestors(i)]
    if not after or not math.isclose(total * math.prod(k for _, k in after), want, rel_tol=1e-6):
        return False
    at = after[-1][0]
    f.mark(at, {"id": "scaled-after-softmax", "text": (
        f"the attention weights are multiplied by {math.prod(k for _, k in after):.4g} after the softmax, whose "
        f"scores were {'never scaled' if math.isclose(total, 1.0) else f'multiplied by {total:.4g}'}: the lesson "
        f"divides the scores by sqrt(dh) = {1 / want:.4g} before the softmax, so that each row of weights still "
        "sums to 1")}, keep_earlier=True)
    return True


def _scaled_again(f: Findings, factors: list[tuple[int, float]], want: float) -> tuple[int, int] | None:
    """(the step to delete, the step to keep) when the scores are scaled on two steps (the queries divided by
    sqrt(dh), then their product with the keys divided by sqrt(dh) again: by dh in all), one of which alone is the
    lesson's 1/sqrt(dh): the line that scales a second time is the one to change.  A student's trial got the other
    line, already right, "fixed" into itself.  None where no one step alone is right."""
    if len(factors) != 2:
        return None
    right = [i for i, k in factors if math.isclose(k, want, rel_tol=1e-6)]
    if not right:
        return None
    kept = right[-1]  # both right: the later one, on the scores themselves, stays
    extra = next(i for i, _ in factors if i != kept)
    return extra, kept


def _queries_width(f: Findings, ancestors: set[int], default: int) -> int:
    """The last axis of the queries in the latest scores product q @ kᵀ before the softmax (the head width in every
    layout: (B, H, n, dh), (B·H, n, dh), (B, n, H, dh) in an einsum), else `default`."""
    products = sorted(i for i in ancestors if f.namer.labels[i] == "scores" and f.ops[i]["op"] in MATMULS)
    for i in reversed(products):
        data = [t for t in f.namer.product_operands(f.ops[i]) if t.get("shape")]
        if len(data) >= 2 and data[0]["shape"][-1] > 0:
            return int(data[0]["shape"][-1])
    return default


def _scores_product(f: Findings, ancestors: set[int], target: int) -> int:
    """Where scores that are never scaled are made (the product q @ kᵀ, the line to add the scale to), else the
    softmax (or fused attention) itself."""
    products = [i for i in ancestors if f.namer.labels[i] == "scores" and f.ops[i]["op"] in MATMULS]
    return max(products) if products else target


@detector("dropout-always-on")
def dropout_in_eval(f: Findings) -> None:
    """A dropout told training=True (F.dropout's default), or a scaled_dot_product_attention given a dropout_p above
    0, while the module is in eval mode, as the trace runs it: it stays on after model.eval()."""
    for op in f.ops:
        if op["op"] == "scaled_dot_product_attention":
            p = number(sdpa_argument(op, "dropout_p"))
            if p:
                f.mark(op["i"], {"id": "dropout-always-on", "text": (
                    f"scaled_dot_product_attention is given dropout_p={p:g} although the module is in eval mode: "
                    "SDPA does not know the module's mode, so its dropout stays on after model.eval(); pass "
                    "dropout_p=p if self.training else 0.0")}, keep_earlier=True)
            continue
        if op["op"] not in DROPOUTS or op["op"] == "native_dropout":
            continue
        raw = op["kwargs"].get("training", op["kwargs"].get("train",  # torch.dropout(x, p, train)
                                                             op["args"][2] if len(op["args"]) > 2 else "True"))
        if raw == "True":
            f.mark(op["i"], {"id": "dropout-always-on", "text": (
                "this dropout is told training=True (F.dropout's default) although the module is in eval mode: it "
                "stays on after model.eval(); pass training=self.training, or use an nn.Dropout module")},
                keep_earlier=True)
    _dropout_by_hand(f)


RANDOM_DRAWS = {"rand_like", "rand", "bernoulli", "bernoulli_"}  # a keep-mask drawn by hand


def _dropout_by_hand(f: Findings) -> None:
    """A random draw (torch.rand_like, bernoulli) multiplied into the attention weights while the module is in eval
    mode, as the trace runs it: dropout written by hand, with no `if self.training` around it."""
    for op in f.ops:
        if op["op"] not in RANDOM_DRAWS or op.get("raised"):
            continue
        into_weights = any(
            later["op"] in MULTIPLIES and len(later["in"]) >= 2
            and any(t.get("src") == op["i"] or t.get("src") is not None and op["i"] in f.namer.ancestors(t["src"])
                    for t in later["in"][:2])
            and any(f.namer.derives_from(t, ("softmax",)) for t in later["in"][:2])
            for later in f.ops[op["i"] + 1:])
        if into_weights:
            f.mark(op["i"], {"id": "dropout-always-on", "title": (
                f"Attention dropout drawn by hand (torch.{op['op']}) at every call, also after model.eval()"),
                "text": (
                f"this {op['op']} draws a dropout mask for the attention weights although the module is in eval "
                "mode: written by hand, the dropout stays on after model.eval(); draw it only `if self.training:`, "
                "or use an nn.Dropout module")}, keep_earlier=True)


def _fused_scale(op: dict, dh: int) -> float:
    """What one fused attention multiplies its scores by: its `scale`, else 1/sqrt(its queries' width).  Only the
    attention judged: a layer of single heads calls one per head (a ModuleList of heads), and the product of all
    their scales (1/2 times 1/2 for two heads of width 4) marked a correct first head "divided by dh"."""
    if op["op"] != "scaled_dot_product_attention":
        return 1.0
    given = number(sdpa_argument(op, "scale"))
    q_width = op["in"][0]["shape"][-1] if op["in"] else dh
    return given if given is not None else 1 / math.sqrt(q_width)


def _softmax_axis(dim: int, ndim: int) -> dict:
    """A softmax over another axis than the keys'.  Over the queries' axis it is the catalogued mistake as told; over
    another axis (the heads, the batch) the same mistake has other effects, so the mark says them itself (`title`,
    `symptom`), and the diagnosis shows those instead of the catalogue's queries-axis story."""
    axis = dim % ndim
    names = {ndim - 2: "the queries", **({0: "the batch", 1: "the heads"} if ndim == 4 else {0: "the batch and "
                                                                                               "the heads"})}
    over = names.get(axis, f"axis {axis}")
    mark = {"id": "softmax-not-last-axis", "text": (
        f"softmax over dim={dim} of a {ndim}-d score tensor: it normalises over {over}, not over the keys; use "
        "dim=-1 (the last axis)")}
    if axis != ndim - 2:
        mark["title"] = f"softmax over dim={dim} ({over.removeprefix('the ')}) instead of dim=-1 (keys)"
        mark["symptom"] = (f"Each weight is normalised across {over}, not across the keys, so a token's weights no "
                           "longer sum to 1; a future score is -inf there too, so its softmax is 0/0 = NaN, which "
                           "spreads to the outputs.")
    return mark

