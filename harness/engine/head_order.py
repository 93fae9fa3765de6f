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

Heads on strided features (`Strided`) are the other reading: a layer that splits every projection with
`view(B, n, dh, H).permute(0, 3, 1, 2)` (head h takes features h, h + H, h + 2H, ...) and merges back the same way
(`permute(0, 2, 3, 1).reshape(B, n, d)`) is the lesson's layer with the rows of W_q, W_k, W_v and the columns of W_o
renumbered alike: each head reads and writes the same features, one layout for the whole layer.  One candidate, not
a search: it is a reading only once the reference under it reproduces the module.  A strided split with the
lesson's merge, the lesson's split with a strided merge, or a strided split on some projections only is no reading
(a head's features do not go back where they came from, or its queries, keys and values are different features):
those are view-order mistakes (checks/view_order.py names them, computed by the reference itself).

A known mistake beside either reading (heads merged last first and the scores never scaled) is no reading: the
reference reproduces it under none.  `readings` gives the readings its output points to, unproven, and `find_with`
proves one by a known mistake's variant instead of the reference (harness.engine.mapping._mistake_reordered for the
proof, Context._order_heads for every other configuration): only where the reference reproduced under no reading.
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
        what = ("the column blocks of W_o (one per head) were read in that order: the same layer with W_o's input "
                "blocks renumbered" if self.on_out else
                "the row blocks of W_q, W_k and W_v (one per head) were read in that order, as your layer has no "
                "output projection: the same layer with its heads renumbered")  # (no W_o: none of its blocks)
        return (f"with {heads} heads, your heads are merged {how}; {what}, not a mistake (each configuration's order "
                "is read from its own output)")

    def to_dict(self) -> dict:
        return {"order": list(self.order), "on": "wo columns" if self.on_out else "wq, wk, wv rows"}


def _ordinal(n: int) -> str:
    """2 -> '2nd', 3 -> '3rd', 4 -> '4th', 12 -> '12th', 22 -> '22nd'."""
    return f"{n}{'th' if n % 100 in (11, 12, 13) else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _strided(size: int, heads: int) -> np.ndarray:
    """index[h·dh + j] = j·H + h: where feature j of head h is in a projection split with view(B, n, dh, H)."""
    dh = size // heads
    return np.arange(size).reshape(dh, heads).T.reshape(-1)


@dataclass(frozen=True)
class Strided:
    """Heads on strided features, split and merged alike: head h is rows h, h + H, ... of W_q (of W_k and W_v with
    their own number of heads, under grouped-query attention) and the same columns of W_o (`on_out`: the reading
    needs W_o, which puts the merged features back in the lesson's blocks)."""

    heads: int
    kv_heads: int
    on_out: bool = True

    def _index(self, role: str, size: int) -> np.ndarray:
        return _strided(size, self.kv_heads if role[1] in "kv" else self.heads)

    def placed(self, weights: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The lesson's roles as the module holds them: row h·dh + j of W_q at row j·H + h, and so the columns of
        W_o, so that the module computes the reference with `weights`."""
        out = dict(weights)
        for role, value in weights.items():
            if value is None or role in ("bo",):
                continue
            held = np.empty_like(value)
            if role == "wo":
                held[:, self._index(role, value.shape[1])] = value
            else:
                held[self._index(role, value.shape[0])] = value
            out[role] = held
        return out

    def read(self, held: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The module's parameters (or their gradients) as the lesson's roles: the inverse of `placed`."""
        out = dict(held)
        for role, value in held.items():
            if value is None or role in ("bo",):
                continue
            out[role] = (value[:, self._index(role, value.shape[1])] if role == "wo"
                         else value[self._index(role, value.shape[0])])
        return out

    def describe(self) -> str:
        return (f"with {self.heads} heads, each head takes every {_ordinal(self.heads)} feature (head h: h, h + "
                f"{self.heads}, h + {2 * self.heads}, ...: view(B, n, dh, H), where the lesson splits with "
                "view(B, n, H, dh)) and is merged back to those same features; the rows of W_q, W_k, W_v and the "
                "columns of W_o were read in that order: the same layer with its features renumbered, not a mistake "
                "of the math (weights saved from the lesson's layer would need the same renumbering)")

    def to_dict(self) -> dict:
        return {"order": "strided", "on": "wq, wk, wv rows and wo columns"}


def _strided_reading(x: np.ndarray, heads: int, w: numpy_ref.Weights, own: np.ndarray, rope) -> Strided | None:
    """The strided reading where the reference under it reproduces `own`, proven as every reading is."""
    kv = w.kv_heads(heads)
    if w.d_out // heads < 2 or own.shape != (*x.shape[:2], w.d_out) or not np.all(np.isfinite(own)):
        return None  # one feature a head: the strided layout is the lesson's
    found = Strided(heads, kv)
    read = numpy_ref.Weights(**found.read(w.as_dict()))
    return found if close(own, numpy_ref.forward(x, heads, read, rope=rope)) else None


def find(x: np.ndarray, heads: int, w: numpy_ref.Weights, own: np.ndarray, rope=None,
         on_out: bool = True) -> HeadOrder | Strided | None:
    """The order of the heads (`_block_order`), or else heads on strided features (`Strided`, with an output
    projection only), under which the reference reproduces `own`; None when neither does."""
    if heads < 2 or w.d_out % heads:
        return None
    return _block_order(x, heads, w, own, rope, on_out) or (_strided_reading(x, heads, w, own, rope) if on_out
                                                            else None)


def _nearest_blocks(x: np.ndarray, heads: int, w: numpy_ref.Weights, own: np.ndarray, rope=None,
                    on_out: bool = True) -> tuple[tuple[int, ...], np.ndarray, np.ndarray] | None:
    """(the order the evidence gives, the module's merged heads recovered from `own`, the reference's heads): the
    merged heads recovered through W_o (itself when `on_out` is False: W_o is the identity), each block matched to
    the nearest of the reference's heads; None where they cannot be recovered (W_o near singular, an output of
    another shape or not finite)."""
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
    return order, merged, ctx


def _block_order(x: np.ndarray, heads: int, w: numpy_ref.Weights, own: np.ndarray, rope=None,
                 on_out: bool = True) -> HeadOrder | None:
    """The head order under which the reference reproduces `own`, the module's output for `x` with its parameters
    read (in the plain head order) as `w`; None when there is none other than the plain one.  Evidence first
    (`_nearest_blocks`); then the proof: that order must be a permutation, and the reference with the weights read
    in it must reproduce `own` (relative 1e-5).  Cost: one reference forward, one solve, H² block distances and, for
    a permutation, one forward more; no round trip."""
    nearest = _nearest_blocks(x, heads, w, own, rope, on_out)
    found = _permuted(nearest[0], w.d_out // heads, on_out) if nearest is not None else None
    if found is None:
        return None
    read = numpy_ref.Weights(**found.read(w.as_dict()))
    return found if close(own, numpy_ref.forward(x, heads, read, rope=rope)) else None


def _permuted(order: tuple[int, ...], width: int, on_out: bool) -> HeadOrder | None:
    """The order the evidence gave as a reading, where it is a permutation of the heads other than the plain one."""
    if sorted(order) != list(range(len(order))) or order == tuple(range(len(order))):
        return None
    return HeadOrder(order, width, on_out)


def readings(x: np.ndarray, heads: int, w: numpy_ref.Weights, own: np.ndarray, rope=None,
             on_out: bool = True) -> list[HeadOrder | Strided]:
    """The readings of the heads' order that the module's output points to, unproven: where no reading lets the
    reference reproduce a layer, a known mistake may under one of these (issue 28: heads merged last first and
    scores never scaled left every check of the math cannot-tell).  The order of whole head blocks whose merged
    heads are nearest the reference's (`_nearest_blocks`), and heads on strided features (with an output projection
    only) where the merged heads, read strided, are nearer the strided reference's heads than they are to the
    lesson's blocks.  A scaling, masking or softmax mistake made in the lesson's head order points to neither (its
    heads stay nearest their own blocks), so such a layer pays for no mistake tried under another order (a
    view-order mistake, which mixes the heads, may point to one: the plain order names it before any is asked).
    Cost: one reference forward and one solve, and one reference forward more for the strided comparison."""
    nearest = _nearest_blocks(x, heads, w, own, rope, on_out)
    if nearest is None:
        return []
    order, merged, ctx = nearest
    pointed = [found] if (found := _permuted(order, w.d_out // heads, on_out)) is not None else []
    if on_out and w.d_out // heads >= 2:
        strided = Strided(heads, w.kv_heads(heads))
        cache: dict = {}
        numpy_ref.forward(x, heads, numpy_ref.Weights(**strided.read(w.as_dict())), cache=cache, rope=rope)
        theirs = cache["ctx"].reshape(-1, w.d_out)
        if np.linalg.norm(merged[:, _strided(w.d_out, heads)] - theirs) < np.linalg.norm(merged - ctx):
            pointed.append(strided)
    return pointed


def find_with(x: np.ndarray, heads: int, w: numpy_ref.Weights, own: np.ndarray, computes, rope=None,
              on_out: bool = True) -> HeadOrder | Strided | None:
    """The reading pointed to (`readings`) under which `computes` (weights read as the lesson's roles -> the output:
    a known mistake's variant) reproduces `own`, proven as every reading is; None where none does.  For a layer
    whose mapping a known mistake proved under a head order: each configuration's order, read from its own output
    (Context._order_heads)."""
    return next((found for found in readings(x, heads, w, own, rope, on_out)
                 if close(own, computes(numpy_ref.Weights(**found.read(w.as_dict()))))), None)
