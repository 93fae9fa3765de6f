"""The reference computation in numpy (float64), forward and backward, for the trusted side of the harness.

The process that computes verdicts never imports torch nor the student's code: it chooses weights and inputs,
computes what the lesson's `CausalMHA` gives for them with this module, and compares with the numbers the
student's process sends back.  `tests/test_reference.py` ties this module to the torch reference and to autograd.

Weights follow the nn.Linear convention: `wq`, `wk`, `wv` have shape (d_out, d_in), `wo` (d_out, d_out), biases
(d_out,).  `split` and `merge` select the lesson's reshapes or a known view-order mistake, so that a check can say
which mistake a student's numbers match; a split mistake may hit only some of the projections ("view-bhnd:q": the
queries split with view(B, H, n, dh), the keys and values the lesson's way; "strided:v": the values split on
strided features).  A split and a merge both "strided" are no mistake: they are the lesson's layer with its features
renumbered (harness.engine.head_order.Strided reads it so).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from reference import grouped

ROLES = ("wq", "wk", "wv", "wo", "bq", "bk", "bv", "bo")
SPLITS = ("lesson", "view-bhnd", "strided")  # view(B, n, H, dh).transpose(1, 2)  |  view(B, H, n, dh) straight from
# (B, n, d)  |  view(B, n, dh, H).permute(0, 3, 1, 2): head h takes features h, h + H, h + 2H, ... (strided)
PARTIAL_SPLITS = tuple(f"{how}:{roles}" for how in SPLITS[1:]
                       for roles in ("q", "k", "v", "qk", "qv", "kv"))  # only these projections
MERGES = ("lesson", "no-transpose", "strided")  # transpose(1, 2).contiguous().view(B, n, d)  |  view(B, n, d) without
# transpose  |  permute(0, 2, 3, 1).reshape(B, n, d): feature j of head h back at j·H + h (strided)


@dataclass
class Weights:
    """One set of attention weights; a missing bias is zero."""

    wq: np.ndarray
    wk: np.ndarray
    wv: np.ndarray
    wo: np.ndarray
    bq: np.ndarray | None = None
    bk: np.ndarray | None = None
    bv: np.ndarray | None = None
    bo: np.ndarray | None = None

    @property
    def d_out(self) -> int:
        return self.wq.shape[0]

    @property
    def d_in(self) -> int:
        return self.wq.shape[1]

    def bias(self, name: str) -> np.ndarray:
        b = getattr(self, name)
        return np.zeros(getattr(self, "w" + name[1:]).shape[0]) if b is None else b

    def kv_heads(self, heads: int) -> int:
        """Key/value heads: heads, unless W_k and W_v are narrower (grouped-query attention, reference.grouped)."""
        return grouped.kv_heads_of(self.wk, self.d_out, heads)

    def as_dict(self) -> dict[str, np.ndarray]:
        return {r: getattr(self, r) for r in ROLES if getattr(self, r) is not None}


def random_weights(rng: np.random.Generator, d_in: int, d_out: int, qkv_bias: bool, out_bias: bool = True,
                   d_kv: int | None = None) -> Weights:
    """Weights drawn like nn.Linear's default init (uniform, ±1/sqrt(fan_in)), so scores have realistic sizes;
    `d_kv`: the height of W_k and W_v (kv_heads · dh, grouped-query attention), d_out when None."""

    def u(shape, fan_in):
        bound = 1.0 / np.sqrt(fan_in)
        return rng.uniform(-bound, bound, size=shape)

    kv = d_out if d_kv is None else d_kv
    w = Weights(u((d_out, d_in), d_in), u((kv, d_in), d_in), u((kv, d_in), d_in), u((d_out, d_out), d_out))
    if qkv_bias:
        w.bq, w.bk, w.bv = u((d_out,), d_in), u((kv,), d_in), u((kv,), d_in)
    if out_bias:
        w.bo = u((d_out,), d_out)
    return w


def split_for(split: str, role: str) -> str:
    """How the projection `role` ("q", "k" or "v") is split under `split`: "lesson", "view-bhnd" or "strided"."""
    how, _, roles = split.partition(":")
    if roles and (how not in SPLITS or not set(roles) <= set("qkv")):
        raise ValueError(split)
    return how if not roles or role in roles else "lesson"


def _split(t: np.ndarray, heads: int, how: str) -> np.ndarray:
    B, n, d = t.shape
    if how == "lesson":
        return t.reshape(B, n, heads, d // heads).transpose(0, 2, 1, 3)
    if how == "view-bhnd":
        return t.reshape(B, heads, n, d // heads)
    if how == "strided":
        return t.reshape(B, n, d // heads, heads).transpose(0, 3, 1, 2)
    raise ValueError(how)


SPLIT_UNDONE_BY = {"lesson": "lesson", "view-bhnd": "no-transpose", "strided": "strided"}  # the merge that puts a
# split's (B, H, n, dh) back to (B, n, d) as it was: each split's inverse, and so the adjoint of the other


def _split_back(g: np.ndarray, how: str) -> np.ndarray:
    """Adjoint of `_split`: (B, H, n, dh) gradient back to (B, n, d), the merge that undoes the split."""
    return _merge(g, SPLIT_UNDONE_BY[how])


def _merge(c: np.ndarray, how: str) -> np.ndarray:
    B, H, n, dh = c.shape
    if how == "lesson":
        return c.transpose(0, 2, 1, 3).reshape(B, n, H * dh)
    if how == "no-transpose":
        return c.reshape(B, n, H * dh)
    if how == "strided":
        return c.transpose(0, 2, 3, 1).reshape(B, n, H * dh)
    if how == "batch-swap":  # transpose(0, 2) where transpose(1, 2) belongs: (n, H, B, dh) read as (B, n, d)
        return c.transpose(2, 1, 0, 3).reshape(B, n, H * dh)
    raise ValueError(how)


def _merge_back(g: np.ndarray, heads: int, how: str) -> np.ndarray:
    """Adjoint of `_merge`: (B, n, d) gradient back to (B, H, n, dh), the split that the merge undoes."""
    return _split(g, heads, next(split for split, merge in SPLIT_UNDONE_BY.items() if merge == how))


@functools.lru_cache(maxsize=64)
def causal_mask(n: int) -> np.ndarray:
    """True above the diagonal: position t may not look at s > t (read-only: made once per n)."""
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    mask.flags.writeable = False
    return mask


def _softmax_masked(scores: np.ndarray) -> np.ndarray:
    n = scores.shape[-1]
    s = np.where(causal_mask(n), -np.inf, scores)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    return e / e.sum(axis=-1, keepdims=True)


def forward(x: np.ndarray, heads: int, w: Weights, split: str = "lesson", merge: str = "lesson",
            cache: dict | None = None, rope=None):
    """y = out_proj(merge(softmax(mask(QKᵀ/√dh)) V)); `cache` receives the intermediates for `backward`; `rope` (a
    reference.rotary.Rope, or None) rotates the queries and keys of every head after the split."""
    Q, K, V, P = _attend(x, heads, w, split, rope)
    ctx = _merge(P @ V, merge)
    y = _linear(ctx, w.wo, w.bias("bo"))
    if cache is not None:
        cache.update(x=x, Q=Q, K=K, V=V, P=P, ctx=ctx, heads=heads, split=split, merge=merge, rope=rope)
    return y


def forward_many(x: np.ndarray, heads: int, w: Weights, pairs, rope=None) -> dict[tuple[str, str], np.ndarray]:
    """`forward` for each (split, merge) of `pairs` on the same input and weights, the same numbers: the attention
    once per split, then each merge and the output projection (view-order compares a module that matches none of
    them with some forty, on every configuration)."""
    mixed: dict[str, np.ndarray] = {}
    out = {}
    for split, merge in pairs:
        if split not in mixed:
            _, _, V, P = _attend(x, heads, w, split, rope)
            mixed[split] = P @ V
        out[split, merge] = _linear(_merge(mixed[split], merge), w.wo, w.bias("bo"))
    return out


def _rows(t: np.ndarray) -> np.ndarray:
    """(B, n, d) as (B·n, d): one matrix product instead of B (numpy multiplies a stack matrix by matrix, several
    times slower than one product of the rows, measured 27 ms against 15 ms for 16 × 63 × 256)."""
    return t.reshape(-1, t.shape[-1])


def _linear(t: np.ndarray, weight: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """t @ weight.T (+ bias), nn.Linear's convention, on the rows of a (B, n, d) tensor."""
    out = _rows(t) @ weight.T
    if bias is not None:
        out += bias
    return out.reshape(*t.shape[:-1], weight.shape[0])


def _attend(x: np.ndarray, heads: int, w: Weights, split: str, rope) -> tuple[np.ndarray, ...]:
    """(Q, K, V, P): the heads split `split`'s way (rotated by `rope`), and the masked softmax of their scores."""
    dh = w.d_out // heads
    kv = w.kv_heads(heads)
    q = _linear(x, w.wq, w.bias("bq"))
    k = _linear(x, w.wk, w.bias("bk"))
    v = _linear(x, w.wv, w.bias("bv"))
    Q, K, V = (_split(t, heads if role == "q" else kv, split_for(split, role)) for role, t in zip("qkv", (q, k, v)))
    if rope is not None:
        Q, K = rope.apply(Q), rope.apply(K)
    if kv != heads:  # grouped-query attention: query head h uses key/value head h // (heads // kv)
        K, V = grouped.expand(K, heads), grouped.expand(V, heads)
    return Q, K, V, _softmax_masked(Q @ K.transpose(0, 1, 3, 2) / np.sqrt(dh))


def backward(gy: np.ndarray, w: Weights, cache: dict) -> dict[str, np.ndarray]:
    """Vector-Jacobian product of `forward`: gradients of sum(gy * y) for x and every weight role."""
    x, Q, K, V, P, ctx = (cache[k] for k in ("x", "Q", "K", "V", "P", "ctx"))
    heads, split, merge = cache["heads"], cache["split"], cache["merge"]
    dh = w.d_out // heads
    g = {"wo": _rows(gy).T @ _rows(ctx), "bo": gy.sum(axis=(0, 1))}
    gC = _merge_back(_linear(gy, w.wo.T), heads, merge)
    gP = gC @ V.transpose(0, 1, 3, 2)
    gV = P.transpose(0, 1, 3, 2) @ gC
    gS = P * (gP - (gP * P).sum(axis=-1, keepdims=True)) / np.sqrt(dh)
    gQ, gK = gS @ K, gS.transpose(0, 1, 3, 2) @ Q
    kv = w.kv_heads(heads)
    if kv != heads:  # each key/value head collects the gradients of the query heads that share it
        gK, gV = grouped.collapse(gK, kv), grouped.collapse(gV, kv)
    if cache.get("rope") is not None:  # Q and K are the rotated ones: back through the rotation
        gQ, gK = cache["rope"].unapply(gQ), cache["rope"].unapply(gK)
    gx = np.zeros_like(x)
    for role, gT in (("q", gQ), ("k", gK), ("v", gV)):
        gt = _split_back(gT, split_for(split, role))
        g["w" + role] = _rows(gt).T @ _rows(x)
        g["b" + role] = gt.sum(axis=(0, 1))
        gx += _linear(gt, getattr(w, "w" + role).T)
    g["x"] = gx
    return g
