"""Child side: read a layer whose weights are raw parameters with names that say no role, by their order.

A student's trial (issue 28): `self.mats = nn.ParameterList([W_q, W_k, W_v, W_o])` used as `x @ W`, or one stacked
`self.W = nn.Parameter(torch.randn(3, d, d))` used as `x @ self.W[0]`, `x @ self.W[1]`, `x @ self.W[2]` beside `W_out`
and `b_out`, had no reading at all (harness.child.layouts reads names, nn.Linear layers by position, and per-head
3-D parameters): every weight check could not tell, so a layer that forgot to scale its scores ended with zero failing
checks, and the `--map` the report suggested cannot name `W[0]`.

Read here as the lesson declares them (queries, keys, values, then the output projection), only where the
parameters are nothing but those (every parameter of the module takes a role): four matrices in order, or one
stacked (3, ., .) parameter and one matrix; vectors of the output width are b_o alone (one of them) or b_q, b_k, b_v,
b_o (four, in order).  Never certain: the orientation of a matrix (x @ W or W @ x) is free, and the trusted side
keeps a reading only when the reference, or one known mistake, then reproduces the layer's own output
(harness.engine.mapping), exactly as for nn.Linear layers read by position.
"""
from __future__ import annotations

import itertools

import torch
import torch.nn as nn

from harness.child.layouts import Layout, Piece, _validate

HOW = "by position of the raw parameters (names not recognised: queries, keys, values, output, in that order)"
HOW_STACKED = ("by position of the raw parameters (names not recognised: a stacked (3, ., .) parameter read as "
               "queries, keys, values, then the output projection)")


def by_position(module: nn.Module, d_in: int, d_out: int, out_proj: bool = True) -> list[Layout]:
    """The readings of `module`'s raw parameters by their order, each a Layout that is not certain; [] where the
    parameters are not exactly the lesson's (other matrices, a normalisation's weights, a single-head layer)."""
    if not out_proj:
        return []
    params = list(module.named_parameters())
    matrices = [(n, p) for n, p in params if p.dim() >= 2]
    vectors = [(n, p) for n, p in params if p.dim() == 1]
    biases = _biases(vectors, d_out)
    if biases is None:
        return []
    if len(matrices) == 4 and all(p.dim() == 2 for _, p in matrices):
        pieces = [[Piece(p, n, flip) for flip in _orientations(p, d_in, d_out)] for n, p in matrices[:3]]
        how = HOW
    elif len(matrices) == 2 and matrices[0][1].dim() == 3 and matrices[0][1].shape[0] == 3 and \
            matrices[1][1].dim() == 2:
        n, p = matrices[0]
        pieces = [[Piece(p, n, flip, index=j) for flip in _orientations(p[j], d_in, d_out)] for j in range(3)]
        how = HOW_STACKED
    else:
        return []
    out_name, out = matrices[-1]
    outs = [Piece(out, out_name, flip) for flip in _orientations(out, d_out, d_out)]
    layouts = []
    for flip_qkv, o in itertools.product((True, False), outs):  # x @ W first: the way raw parameters are written
        qkv = [next((q for q in options if q.transpose == flip_qkv), None) for options in pieces]
        if None in qkv:
            continue
        roles = {role: [piece] for role, piece in zip(("wq", "wk", "wv", "wo"), [*qkv, o])}
        roles.update({role: [Piece(p, n)] for role, (n, p) in biases.items()})
        if _validate(roles, d_in, d_out) is None:
            layouts.append(Layout(roles, how))
    return layouts


def _orientations(p: torch.Tensor, d_in: int, d_out: int) -> list[bool]:
    """The transposes under which matrix `p` is (d_out, d_in) in nn.Linear convention: True (used as x @ W, of
    shape (d_in, d_out)) first; both for a square one, whose orientation its shape cannot tell."""
    return [flip for flip in (True, False) if tuple(p.t().shape if flip else p.shape) == (d_out, d_in)]


def _biases(vectors: list[tuple[str, torch.Tensor]], d_out: int) -> dict[str, tuple[str, torch.Tensor]] | None:
    """The vectors as biases, in order: none, b_o alone, or b_q, b_k, b_v, b_o; None for anything else (a
    normalisation's weight beside them, a width that is not d_out)."""
    if any(p.shape[0] != d_out for _, p in vectors):
        return None
    roles = {0: (), 1: ("bo",), 4: ("bq", "bk", "bv", "bo")}.get(len(vectors))
    return None if roles is None else dict(zip(roles, vectors))
