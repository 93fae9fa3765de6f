"""The lesson's layer with its classic mistakes as switches, in numpy: the fingerprints of the mutants.

`forward(x, heads, w, **knobs)` with every knob at its default is the reference (`numpy_ref.forward`); each mutant
that changes only what the layer computes declares its knobs (`MutantInfo.variant`), and `tests/test_mutants.py`
proves that the torch mutant and this function agree.  Diagnosis then compares a student's output, under the same
weights and input, with every variant, without torch and without running any mutant.

Knobs:
- split: "lesson" | "view-bhnd" | "view-bhnd:q" (only the queries; also :k, :v, :qk, :qv, :kv) | "strided" (every
  H-th feature to a head: view(B, n, dh, H).permute(0, 3, 1, 2)) | "strided:q" (and the same partial ones)
- merge: "lesson" | "no-transpose" | "strided" (permute(0, 2, 3, 1).reshape(B, n, d)) | "batch-swap" (transpose(0, 2):
  the batch and token axes swapped, then viewed as (B, n, d))
- scale: "sqrt-dh" | "sqrt-d" | "none" | "dh" | "sqrt-d-in" (the input width: the single-head lesson's d_in) |
  "sqrt-h" (the number of heads) | "sqrt-n" (the number of tokens: k.size(-2) for k.size(-1)) | a number: the
  divisor itself (a constant such as 8.0, or any width no name above has)
- mask: "causal" | "hide-diagonal" | "one-future" | "none" | "inverted" | "after-softmax" | "hides-past" (tril(-1):
  the past hidden, the diagonal and the future kept)
- scaled: "scores" | "weights" (the divisor applied after the softmax, to the attention weights, the scores left
  unscaled: `softmax(scores) * scale`; each row then sums to 1/divisor)
- fill: the value masked scores get (-inf in the lesson; -10 and -100 are leaks)
- mask_op: "fill" (the masked scores replaced by `fill`; multiplying the scores by a 0/1 mask is a fill of 0) |
  "add" (`fill` added to the masked scores: a 0/1 mask added, +1 on the future, or -1 for +1 on the past)
- softmax_axis: -1 | -2
- keys: "k" | "q" (keys computed with W_q) | "swap" (queries from W_k and keys from W_q)
- values: "v" | "k" (the attention weights applied to the keys, `weights @ k`: W_v never used)
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
- residual: False | True (the input added to the output, x + attn(x): the block's residual connection inside the layer)
- bias_left_out: "" | "q" (the query bias never added: F.linear(x, self.q.weight); also "k", "v" and any of them
  together: a key bias left out changes no output, softmax ignores what it adds to a row of scores)
"""
from __future__ import annotations

import contextlib
import functools
import threading

import numpy as np

from reference import grouped
from reference.numpy_ref import Weights, _merge, _split, split_for
from reference.rotary import THETA, apply_knobs

DEFAULTS = {"split": "lesson", "merge": "lesson", "scale": "sqrt-dh", "scaled": "scores", "mask": "causal",
            "fill": -np.inf,
            "mask_op": "fill", "softmax_axis": -1, "keys": "k", "values": "v", "out_proj": True, "empty_rows": "nan",
            "rope": "none", "rope_theta": THETA, "rope_values": False, "rope_keys": True,
            "rope_freqs": "head", "rope_where": "heads",
            "rope_key_shift": 0, "kv_heads": None, "kv_pairing": "interleave", "kv_mask": "all", "kv_expand": "heads",
            "residual": False, "bias_left_out": ""}
NARROW_KNOBS = ("kv_pairing", "kv_expand")  # how narrower K/V are expanded: a mistake only K/V narrower than d_out have


def applies(w: Weights, heads: int, knobs: dict) -> bool:
    """Whether `knobs` describe a layer these weights can be: pairing query heads with key/value heads needs key/value
    heads narrower than the queries, and a layer with narrower W_k, W_v cannot compute keys with W_q."""
    grouped_w = w.wk.shape[0] != w.d_out
    if grouped_w and knobs.get("keys", "k") != "k":
        return False
    if knobs.get("residual") and w.d_in != w.d_out:  # x + attn(x) needs the input as wide as the output
        return False
    return grouped_w or not set(NARROW_KNOBS) & set(knobs)


ONE_SCALE = {"scale", "scaled"}  # how much and where the layer scales: one mistake of its scaling, not two
SETTINGS = ("rope", "rope_theta")  # what layer a mistake is made in (a rotary one), not the mistake itself


def compose(a: dict, b: dict) -> dict | None:
    """The knobs of a layer with both mistakes `a` and `b`, or None when they cannot both be in one layer (two scales,
    two masks, one projection's split twice).  Knobs set apart merge; the split's view order on some projections
    merges with it on the others (the queries' and the keys' views both wrong: "view-bhnd:qk"); a setting both
    declare alike is the layer they are both made in (two rotary mistakes each say `rope`: the values rotated and
    the keys' positions shifted are one rotary layer with both)."""
    shared = {knob for knob in set(a) & set(b) if not (knob in SETTINGS and a[knob] == b[knob])}
    if shared - {"split"} or ONE_SCALE <= set(a) | set(b):
        return None
    both = {**a, **b}
    if shared:
        how = a["split"].partition(":")[0]
        if b["split"].partition(":")[0] != how:
            return None  # view(B, H, n, dh) on some projections and strided on others: no one split says so
        mine, theirs = _viewed(a["split"]), _viewed(b["split"])
        if not mine or not theirs or mine & theirs:
            return None
        roles = "".join(r for r in "qkv" if r in mine | theirs)
        both["split"] = how if roles == "qkv" else f"{how}:{roles}"
    return both


def _viewed(split: str) -> set[str]:
    """The projections split other than the lesson's way under `split` (all of them the same way)."""
    return {r for r in "qkv" if split_for(split, r) != "lesson"}


_HIDDEN = {"causal": lambda ones: np.triu(ones, 1), "hide-diagonal": lambda ones: np.triu(ones, 0),
           "one-future": lambda ones: np.triu(ones, 2), "none": lambda ones: np.zeros(ones.shape, bool),
           "inverted": lambda ones: ~np.triu(ones, 1), "after-softmax": lambda ones: np.triu(ones, 1),
           "hides-past": lambda ones: np.tril(ones, -1)}


@functools.lru_cache(maxsize=256)
def _future(n: int, mask: str) -> np.ndarray:
    """The positions `mask` hides, read-only and made once per (n, mask): diagnosis and fitting call `forward`
    thousands of times per submission on a few lengths, and building every mask anew each time (five np.triu) was
    a third of the variants' cost (issue 27)."""
    hidden = _HIDDEN[mask](np.ones((n, n), dtype=bool))
    hidden.flags.writeable = False
    return hidden


def _softmax(s: np.ndarray, axis: int) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        s = s - np.max(s, axis=axis, keepdims=True)
        e = np.exp(s)
        return e / e.sum(axis=axis, keepdims=True)


def forward(x: np.ndarray, heads: int, w: Weights, **knobs) -> np.ndarray:
    k_ = _all_knobs(knobs)
    return _finish(_scores_of(x, heads, w, k_), w, k_, x)


def by_fill(x: np.ndarray, heads: int, w: Weights, **knobs):
    """`fill -> forward(x, heads, w, **knobs, fill=fill)`, the same numbers, with what no fill changes (the
    projections, the split, the rotation, the scores and the mask) computed once: harness.engine.fitting evaluates
    a mistake at fifty and more fills per reading (issue 27)."""
    k_ = _all_knobs(knobs)
    ahead = _scores_of(x, heads, w, k_)
    return lambda fill: _finish(ahead, w, {**k_, "fill": fill}, x)


def by_scale(x: np.ndarray, heads: int, w: Weights, **knobs):
    """`divisor -> forward(x, heads, w, **knobs, scale=divisor)`, the same numbers, with the scores computed once
    unscaled: harness.engine.fitting reads a scale off the output at dozens of divisors per reading."""
    k_ = _all_knobs({**knobs, "scale": 1.0})
    if k_["scaled"] != "scores":
        raise ValueError("by_scale reads a divisor of the scores; these knobs scale the weights")
    raw, values, hidden = _scores_of(x, heads, w, k_)
    return lambda by: _finish((raw / float(by), values, hidden), w, k_, x)


FINISH_ONLY = frozenset({"fill", "mask_op", "softmax_axis", "empty_rows", "merge", "out_proj"})  # read by _finish
# alone: variants that differ only in these share their scores
_held = threading.local()  # .scores: {key: (x, w, what _scores gave)} while `shared_scores` is on in this thread


@contextlib.contextmanager
def shared_scores():
    """While on (in this thread), `forward` and `by_fill` compute the scores of each (x, heads, w, knobs before the
    fill) once: diagnosis tries every catalogued mistake on the same input and weights, and most differ only in
    how they mask, soften or merge (issue 27).  The same numbers; x and w must not change in place meanwhile (the
    diagnosis's own input and transplanted weights, which nothing writes)."""
    outer = getattr(_held, "scores", None)
    if outer is None:
        _held.scores = {}
    try:
        yield
    finally:
        if outer is None:
            _held.scores = None


def sharing_scores(f):
    """`f` run with `shared_scores` on."""
    @functools.wraps(f)
    def shared(*args, **kwargs):
        with shared_scores():
            return f(*args, **kwargs)
    return shared


def _scores_of(x: np.ndarray, heads: int, w: Weights, k_: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_scores`, from what `shared_scores` holds when it is on."""
    held = getattr(_held, "scores", None)
    if held is None:
        return _scores(x, heads, w, k_)
    key = (id(x), id(w), heads, tuple(v for k, v in k_.items() if k not in FINISH_ONLY))
    try:
        got = held.get(key)
    except TypeError:  # a knob's value that cannot be a key: computed as without sharing
        return _scores(x, heads, w, k_)
    if got is None or got[0] is not x or got[1] is not w:
        got = held[key] = (x, w, _scores(x, heads, w, k_))
    return got[2]


def _all_knobs(knobs: dict) -> dict:
    unknown = set(knobs) - set(DEFAULTS)
    if unknown:
        raise TypeError(f"unknown knobs {sorted(unknown)}")
    return {**DEFAULTS, **knobs}


def divisor(x: np.ndarray, heads: int, w: Weights, scale) -> float:
    """What the scores are divided by under the knob `scale`: a named width, or the number itself."""
    if not isinstance(scale, str):
        return float(scale)
    d = w.d_out
    return {"sqrt-dh": np.sqrt(d // heads), "sqrt-d": np.sqrt(d), "none": 1.0, "dh": float(d // heads),
            "sqrt-d-in": np.sqrt(w.d_in), "sqrt-h": np.sqrt(heads), "sqrt-n": np.sqrt(x.shape[1])}[scale]


def _scores(x: np.ndarray, heads: int, w: Weights, k_: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The scaled scores (B, H, n, n), the values per head and the positions masked: everything before the fill."""
    left_out = k_["bias_left_out"]
    q = x @ w.wq.T + (0.0 if "q" in left_out else w.bias("bq"))
    k = x @ w.wk.T + (0.0 if "k" in left_out else w.bias("bk"))
    v = x @ w.wv.T + (0.0 if "v" in left_out else w.bias("bv"))
    if k_["keys"] == "q":
        k = q
    elif k_["keys"] == "swap":
        q, k = k, q
    if k_["values"] == "k":
        v = k
    kv = k_["kv_heads"] or w.kv_heads(heads)
    if k_["kv_expand"] == "features" and kv != heads:  # every feature repeated group times: d_out wide, "plain"
        k, v = np.repeat(k, heads // kv, axis=-1), np.repeat(v, heads // kv, axis=-1)
        kv = heads
    Q, K, V = apply_knobs(q, k, v, lambda t, role: _split(t, heads if role == "q" else kv,
                                                          split_for(k_["split"], role)), k_)
    if kv != heads:
        K, V = grouped.expand(K, heads, k_["kv_pairing"]), grouped.expand(V, heads, k_["kv_pairing"])
    by = divisor(x, heads, w, k_["scale"])
    if k_["scaled"] == "weights":  # (P / by) @ V = P @ (V / by): the weights' scale carried by the values
        scores, V = Q @ K.transpose(0, 1, 3, 2), V / by
    else:
        scores = Q @ K.transpose(0, 1, 3, 2) / by
    n = x.shape[1]
    hidden = _future(n, k_["mask"])
    if k_["kv_mask"] == "first-group":  # only the query heads of the first key/value head are masked
        hidden = np.broadcast_to(hidden, (heads, n, n)) & (np.arange(heads) < heads // kv)[:, None, None]
    return scores, V, hidden


def _finish(ahead: tuple[np.ndarray, np.ndarray, np.ndarray], w: Weights, k_: dict, x: np.ndarray) -> np.ndarray:
    """The masked softmax, the values, the merge and the output projection (read-only use of `ahead`); the input
    `x` added to it where the block's residual connection is inside the layer (`residual`)."""
    scores, V, hidden = ahead
    if k_["mask"] == "after-softmax":
        P = np.where(hidden, 0.0, _softmax(scores, k_["softmax_axis"]))
    else:
        masked = scores + k_["fill"] if k_["mask_op"] == "add" else k_["fill"]
        P = _softmax(np.where(hidden, masked, scores), k_["softmax_axis"])
        if k_["empty_rows"] == "zero":
            P = np.where(np.all(hidden, axis=-1, keepdims=True), 0.0, P)
    ctx = _merge(P @ V, k_["merge"])
    out = ctx @ w.wo.T + w.bias("bo") if k_["out_proj"] else ctx
    return out + x if k_["residual"] else out
