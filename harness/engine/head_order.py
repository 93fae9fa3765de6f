"""Heads merged in another order: a reading of W_o's input columns (issue 28, "readings decided by evidence").

A layer that concatenates its heads last head first (`torch.cat([ctx[:, h] for h in reversed(range(H))], -1)`,
`ctx.flip(1)`, a roll, a per-head list walked backwards) before its output projection is the lesson's layer with
the column blocks of W_o (one block of the head width per head) read in that head order: a reparametrisation of W_o,
not a wrong attention layer.  A layer without an output projection (read with W_o = I) that does the same is the
lesson's layer with the row blocks of W_q, W_k and W_v read in that order instead (each head's own projection rows).

The order is decided by evidence, never by trying the H! orders: with the weights the module holds and one output
of it, the merged heads are recovered by undoing the output projection (solving with W_o, square and, drawn at
random, invertible) and each block of them is compared with the reference's heads; the block nearest each head
gives the order, and the order is a reading only once the reference under it reproduces the module's whole output
(`find`), as any reading is proven.  A permutation of whole head blocks never mixes tokens or features within a
head: the view-order mistakes (`view(B, H, n, dh)` on (B, n, d), a merge without the transpose) are not one, their
blocks match no head, and they stay the mistakes they are.  Key/value heads tiled instead of interleaved
(gqa-repeat-not-interleave) are not one either: each query head keeps its own rows of W_q, and only W_o (or, without
it, all three projections together) is read in another order.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.engine.compare import close
from reference import numpy_ref

ILL_CONDITIONED = 1e8  # a W_o this far from invertible says nothing about the merged heads: no order is read


@dataclass(frozen=True)
class HeadOrder:
    """order[j] is the head whose output the module puts in block j of its merge (its concatenation of the heads);
    `on_out`: read on W_o's input columns (False: on the rows of W_q, W_k, W_v and their biases, a layer read
    without an output projection)."""

    order: tuple[int, ...]
    width: int
    on_out: bool = True

    def _index(self) -> np.ndarray:
        return np.concatenate([np.arange(h * self.width, (h + 1) * self.width) for h in self.order])

    def placed(self, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The lesson's roles as the module holds them: what to write into its parameters so that it computes the
        reference with `weights`."""
        idx, out = self._index(), dict(weights)
        if self.on_out:
            if out.get("wo") is not None:
                out["wo"] = out["wo"][:, idx]
            return out
        for role in ("wq", "wk", "wv", "bq", "bk", "bv"):
            if out.get(role) is not None:
                held = np.empty_like(out[role])
                held[idx] = out[role]
                out[role] = held
        return out

    def read(self, held: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The module's parameters (or their gradients) as the lesson's roles: the inverse of `placed`."""
        idx, out = self._index(), dict(held)
        if self.on_out:
            if out.get("wo") is not None:
                wo = np.empty_like(out["wo"])
                wo[:, idx] = out["wo"]
                out["wo"] = wo
            return out
        for role in ("wq", "wk", "wv", "bq", "bk", "bv"):
            if out.get(role) is not None:
                out[role] = out[role][idx]
        return out

    def describe(self) -> str:
        """The order in words, for the report: reversed, rolled, or the list."""
        heads = len(self.order)
        if self.order == tuple(reversed(range(heads))):
            how = "in reverse order (last head first)"
        elif any(self.order == tuple((j - k) % heads for j in range(heads)) for k in range(1, heads)):
            how = f"rolled: head {self.order[0]} first, then {', '.join(map(str, self.order[1:]))}"
        else:
            how = f"in the order {', '.join(map(str, self.order))}"
        what = ("the column blocks of W_o (one per head) were read in that order" if self.on_out else
                "the row blocks of W_q, W_k and W_v (one per head) were read in that order, as W_o is the identity")
        return (f"with {heads} heads, your heads are merged {how}; {what}: the same layer with W_o's input blocks "
                "renumbered, not a mistake (each configuration's order is read from its own output)")

    def to_dict(self) -> dict:
        return {"order": list(self.order), "on": "wo columns" if self.on_out else "wq, wk, wv rows"}


def find(x: np.ndarray, heads: int, w: numpy_ref.Weights, own: np.ndarray, rope=None,
         on_out: bool = True) -> HeadOrder | None:
    """The head order under which the reference reproduces `own`, the module's output for `x` with its parameters
    read (in the plain head order) as `w`; None when there is none other than the plain one.  Evidence first: the
    merged heads recovered from `own` through W_o (itself when `on_out` is False: W_o is the identity), each block
    matched to the nearest of the reference's heads; then the proof: that order must be a permutation, and the
    reference with the weights read in it must reproduce `own` (relative 1e-5).  Cost: one reference forward, one
    solve, H² block distances and, for a permutation, one forward more; no round trip."""
    if heads < 2 or w.d_out % heads or (not on_out and w.kv_heads(heads) != heads):
        return None
    cache: dict = {}
    ref = numpy_ref.forward(x, heads, w, cache=cache, rope=rope)
    if own.shape != ref.shape or not np.all(np.isfinite(own)):
        return None
    d, dh = w.d_out, w.d_out // heads
    merged = (own - w.bias("bo")).reshape(-1, d)
    if on_out:
        if np.linalg.cond(w.wo) > ILL_CONDITIONED:
            return None
        merged = np.linalg.solve(w.wo, merged.T).T  # merged @ W_o^T = own - b_o
    ctx = cache["ctx"].reshape(-1, d)
    blocks = [slice(h * dh, (h + 1) * dh) for h in range(heads)]
    order = tuple(int(np.argmin([np.linalg.norm(merged[:, j] - ctx[:, h]) for h in blocks])) for j in blocks)
    if sorted(order) != list(range(heads)) or order == tuple(range(heads)):
        return None
    found = HeadOrder(order, dh, on_out)
    read = numpy_ref.Weights(**found.read(w.as_dict()))
    return found if close(own, numpy_ref.forward(x, heads, read, rope=rope)) else None
