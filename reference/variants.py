"""The lesson's layer with its classic mistakes as switches, in numpy: the fingerprints of the mutants.

`forward(x, heads, w, **knobs)` with every knob at its default is the reference (`numpy_ref.forward`); each mutant
that changes only what the layer computes declares its knobs (`MutantInfo.variant`), and `tests/test_mutants.py`
proves that the torch mutant and this function agree.  Diagnosis then compares a student's output, under the same
weights and input, with every variant, without torch and without running any mutant.

Knobs:
- split: "lesson" | "view-bhnd" | "view-bhnd:q" (only the queries; also :k, :v, :qk, :qv, :kv)
- merge: "lesson" | "no-transpose"
- scale: "sqrt-dh" | "sqrt-d" | "none" | "dh" | "sqrt-d-in" (the input width: the single-head lesson's d_in)
- mask: "causal" | "hide-diagonal" | "one-future" | "none" | "inverted" | "after-softmax"
- fill: the value masked scores get (-inf in the lesson; -10 and -100 are leaks)
- mask_op: "fill" (the masked scores replaced by `fill`; multiplying the scores by a 0/1 mask is a fill of 0) |
  "add" (`fill` added to the masked scores: a 0/1 mask added, +1 on the future, or -1 for +1 on the past)
- softmax_axis: -1 | -2
- keys: "k" | "q" (keys computed with W_q) | "swap" (queries from W_k and keys from W_q)
- out_proj: True | False
- empty_rows: "nan" | "zero" (a row with every score masked: NaN from a plain softmax, 0 from a fused kernel)
- rope: "none" | "interleaved" | "half" (rotary position embedding, reference.rotary), rope_theta (its base), and its
  mistakes: rope_values (the values rotated too), rope_keys (False: the keys never rotated), rope_freqs
  ("head" | "model"), rope_where ("heads" |
  "before-split"), rope_key_shift (keys' positions ahead of the queries')
- kv_heads: None (read off W_k's height, reference.grouped) | a number of key/value heads
- kv_pairing: "interleave" (query head h uses key/value head h // group) | "repeat" (h % kv_heads, `.repeat`)
- kv_mask: "all" | "first-group" (the mask applied to the first group of query heads only)
- kv_expand: "heads" (each key/value head repeated for its group) | "features" (the flat K/V projections, kv_heads·dh
  wide, repeated feature by feature to d_out before the split: `repeat_interleave(group, dim=-1)`)
"""
from __future__ import annotations

import numpy as np

from reference import grouped
from reference.numpy_ref import Weights, _merge, _split, split_for
from reference.rotary import THETA, apply_knobs

DEFAULTS = {"split": "lesson", "merge": "lesson", "scale": "sqrt-dh", "mask": "causal", "fill": -np.inf,
            "mask_op": "fill", "softmax_axis": -1, "keys": "k", "out_proj": True, "empty_rows": "nan",
            "rope": "none", "rope_theta": THETA, "rope_values": False, "rope_keys": True,
            "rope_freqs": "head", "rope_where": "heads",
            "rope_key_shift": 0, "kv_heads": None, "kv_pairing": "interleave", "kv_mask": "all", "kv_expand": "heads"}
NARROW_KNOBS = ("kv_pairing", "kv_expand")  # how narrower K/V are expanded: a mistake only K/V narrower than d_out have


def applies(w: Weights, heads: int, knobs: dict) -> bool:
    """Whether `knobs` describe a layer these weights can be: pairing query heads with key/value heads needs key/value
    heads narrower than the queries, and a layer with narrower W_k, W_v cannot compute keys with W_q."""
    grouped_w = w.wk.shape[0] != w.d_out
    if grouped_w and knobs.get("keys", "k") != "k":
        return False
    return grouped_w or not set(NARROW_KNOBS) & set(knobs)


SETTINGS = ("rope", "rope_theta")  # what layer a mistake is made in (a rotary one), not the mistake itself


def compose(a: dict, b: dict) -> dict | None:
    """The knobs of a layer with both mistakes `a` and `b`, or None when they cannot both be in one layer (two scales,
    two masks, one projection's split twice).  Knobs set apart merge; the split's view order on some projections
    merges with it on the others (the queries' and the keys' views both wrong: "view-bhnd:qk"); a setting both
    declare alike is the layer they are both made in (two rotary mistakes each say `rope`: the values rotated and
    the keys' positions shifted are one rotary layer with both)."""
    shared = {knob for knob in set(a) & set(b) if not (knob in SETTINGS and a[knob] == b[knob])}
    if shared - {"split"}:
        return None
    both = {**a, **b}
    if shared:
        mine, theirs = _viewed(a["split"]), _viewed(b["split"])
        if not mine or not theirs or mine & theirs:
            return None
        roles = "".join(r for r in "qkv" if r in mine | theirs)
        both["split"] = "view-bhnd" if roles == "qkv" else f"view-bhnd:{roles}"
    return both


def _viewed(split: str) -> set[str]:
    """The projections split with view(B, H, n, dh) under `split`."""
    return {r for r in "qkv" if split_for(split, r) == "view-bhnd"}


def _future(n: int, mask: str) -> np.ndarray:
    ones = np.ones((n, n), dtype=bool)
    return {"causal": np.triu(ones, 1), "hide-diagonal": np.triu(ones, 0), "one-future": np.triu(ones, 2),
            "none": np.zeros((n, n), bool), "inverted": ~np.triu(ones, 1),
            "after-softmax": np.triu(ones, 1)}[mask]


def _softmax(s: np.ndarray, axis: int) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        s = s - np.max(s, axis=axis, keepdims=True)
        e = np.exp(s)
        return e / e.sum(axis=axis, keepdims=True)


def forward(x: np.ndarray, heads: int, w: Weights, **knobs) -> np.ndarray:
    unknown = set(knobs) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown knobs {sorted(unknown)}")
    k_ = {**DEFAULTS, **knobs}
    d = w.d_out
    dh = d // heads
    q = x @ w.wq.T + w.bias("bq")
    k = x @ w.wk.T + w.bias("bk")
    v = x @ w.wv.T + w.bias("bv")
    if k_["keys"] == "q":
        k = q
    elif k_["keys"] == "swap":
        q, k = k, q
    kv = k_["kv_heads"] or w.kv_heads(heads)
    if k_["kv_expand"] == "features" and kv != heads:  # every feature repeated group times: d_out wide, "plain"
        k, v = np.repeat(k, heads // kv, axis=-1), np.repeat(v, heads // kv, axis=-1)
        kv = heads
    Q, K, V = apply_knobs(q, k, v, lambda t, role: _split(t, heads if role == "q" else kv,
                                                          split_for(k_["split"], role)), k_)
    if kv != heads:
        K, V = grouped.expand(K, heads, k_["kv_pairing"]), grouped.expand(V, heads, k_["kv_pairing"])
    scores = Q @ K.transpose(0, 1, 3, 2)
    scores = scores / {"sqrt-dh": np.sqrt(dh), "sqrt-d": np.sqrt(d), "none": 1.0, "dh": float(dh),
                       "sqrt-d-in": np.sqrt(w.d_in)}[k_["scale"]]
    n = x.shape[1]
    hidden = _future(n, k_["mask"])
    if k_["kv_mask"] == "first-group":  # only the query heads of the first key/value head are masked
        hidden = np.broadcast_to(hidden, (heads, n, n)) & (np.arange(heads) < heads // kv)[:, None, None]
    if k_["mask"] == "after-softmax":
        P = np.where(hidden, 0.0, _softmax(scores, k_["softmax_axis"]))
    else:
        masked = scores + k_["fill"] if k_["mask_op"] == "add" else k_["fill"]
        P = _softmax(np.where(hidden, masked, scores), k_["softmax_axis"])
        if k_["empty_rows"] == "zero":
            P = np.where(np.all(hidden, axis=-1, keepdims=True), 0.0, P)
    ctx = _merge(P @ V, k_["merge"])
    return ctx @ w.wo.T + w.bias("bo") if k_["out_proj"] else ctx
