"""Grouped-query and multi-query attention in numpy: several query heads share one key/value head.

The lesson: "Multi-query and grouped-query attention share keys and values among several query heads".  W_k and W_v
then have kv_heads * dh rows instead of d_out (kv_heads = 1: multi-query), and query head h uses key/value head
h // group, group = heads // kv_heads: the K/V heads are expanded with `repeat_interleave(group, dim=1)` (Llama's
`repeat_kv`, an expand and a reshape, is the same).  The classic mistake pairs them the other way: `.repeat(1,
group, 1, 1)` tiles the K/V heads, so query head h uses h % kv_heads ("repeat").

The number of key/value heads is read off the weights (W_k's height over the head width), so every caller of
`numpy_ref.forward` checks a grouped layer without a new argument; plain multi-head attention is kv_heads = heads.
"""
from __future__ import annotations

import numpy as np

PAIRINGS = ("interleave", "repeat")  # h // group (repeat_interleave, the right one) | h % kv_heads (.repeat)


def kv_heads_of(wk: np.ndarray, d_out: int, heads: int) -> int:
    """Key/value heads of weights whose W_k has `wk.shape[0]` rows: heads when it is as wide as the queries."""
    rows = wk.shape[0]
    if rows == d_out or heads <= 0:
        return heads
    dh = d_out // heads
    if dh == 0 or rows % dh or heads % (rows // dh):
        raise ValueError(f"W_k with {rows} rows is not a whole number of key/value heads of width {dh} dividing "
                         f"{heads} heads")
    return rows // dh


def kv_index(heads: int, kv_heads: int, pairing: str = "interleave") -> np.ndarray:
    """For each query head, the key/value head it uses."""
    group = heads // kv_heads
    h = np.arange(heads)
    if pairing == "interleave":
        return h // group
    if pairing == "repeat":
        return h % kv_heads
    raise ValueError(pairing)


def expand(t: np.ndarray, heads: int, pairing: str = "interleave") -> np.ndarray:
    """(B, kv_heads, n, dh) -> (B, heads, n, dh): each query head gets its key/value head."""
    return t[:, kv_index(heads, t.shape[1], pairing)]


def collapse(g: np.ndarray, kv_heads: int, pairing: str = "interleave") -> np.ndarray:
    """Adjoint of `expand`: the gradient of each key/value head is the sum over the query heads that use it."""
    out = np.zeros((g.shape[0], kv_heads) + g.shape[2:])
    np.add.at(out, (slice(None), kv_index(g.shape[1], kv_heads, pairing)), g)
    return out


def opposed(wq: np.ndarray, kv_rows: int, heads: int) -> tuple[np.ndarray, np.ndarray]:
    """(W_q', W_k') with every query head's projection the exact negative of its key/value head's: W_k' is the first
    kv_rows rows of W_q, negated, and query head h gets key/value head h // group's block, so each score is
    -|q|², as W_k = -W_q gives in plain multi-head attention (kv_rows = d_out: W_q kept)."""
    if kv_rows == wq.shape[0]:
        return wq, -wq
    dh = wq.shape[0] // heads
    blocks = wq[:kv_rows]
    rows = np.concatenate([blocks[j * dh:(j + 1) * dh] for j in kv_index(heads, kv_rows // dh)])
    return rows, -blocks
