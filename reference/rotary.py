"""Rotary position embedding (RoPE) in numpy, in both conventions real code uses, and its classic mistakes.

RoPE rotates pairs of coordinates of every query and key by an angle that grows with the token's position, so the
score q_t·k_s depends on t - s only.  Pair i (of head_width/2) turns by position * theta^(-2i/head_width).  Which
coordinates form a pair is the convention:

- "interleaved": (x0, x1), (x2, x3), ... as in the RoFormer paper, CS336 and Meta's llama (complex numbers from
  consecutive pairs, `torch.view_as_complex(x.reshape(..., -1, 2))`);
- "half": (x_i, x_{i + w/2}), "rotate_half", as in HF transformers, GPT-NeoX and rasbt's LLMs-from-scratch.

The two give different numbers for the same weights, so mha-check decides from the numbers which one a layer uses
(harness.engine.mapping).  `rotate` works on (..., n, w) arrays: positions run along the second last axis.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CONVENTIONS = ("interleaved", "half")
NEGATED = "-negated"  # a convention's name + NEGATED: the same pairs turned by minus the angle (modded-nanogpt's
# rotary: y1 = x1 cos + x2 sin).  Scores still depend on t - s only, and the layer is the usual one with one coordinate
# of every pair of W_q's and W_k's rows negated: a correct rotary layer under another reading of its weights.
MIXED = "-mixed-tables"  # a convention's name + MIXED: that convention's pairs (its partner: rotate_half's
# cat((-x2, x1)), or rotate-every-two's) multiplied by cos/sin tables laid out for the other convention (interleaved
# tables, repeat_interleave, under rotate_half; or cat((freqs, freqs)) under rotate-every-two).  The two features of
# a pair then turn by different angles: no rotation, and no reference; a reading a layer so written is proven by
# (harness.engine.mapping), to be compared with the rotary reference of its own pairs.
THETA = 10000.0  # the paper's base, and every usual default
OTHER_THETAS = (500000.0, 1000000.0)  # llama 3's and Qwen's: tried when a layer takes no theta parameter


def frequencies(pairs: int, width: int, theta: float) -> np.ndarray:
    """theta^(-2i/width) for i < pairs: width is the head width (the model width is a classic mistake)."""
    return theta ** (-2.0 * np.arange(pairs) / width)


def rotate(t: np.ndarray, convention: str, theta: float = THETA, positions: np.ndarray | None = None,
           freq_width: int | None = None) -> np.ndarray:
    """t (..., n, w) with each pair of its last axis turned by positions[j] * frequency (positions 0..n-1 by
    default); `freq_width` is the width the frequencies are computed from (the last axis's own by default)."""
    n, w = t.shape[-2], t.shape[-1]
    if w % 2:
        raise ValueError(f"rotary embeddings need an even width, got {w}")
    mixed = convention.endswith(MIXED)
    convention = convention.removesuffix(MIXED)
    turn = -1.0 if convention.endswith(NEGATED) else 1.0
    convention = convention.removesuffix(NEGATED)
    pos = np.arange(n, dtype=float) if positions is None else np.asarray(positions, dtype=float)
    ang = turn * pos[:, None] * frequencies(w // 2, freq_width or w, theta)[None, :]  # (n, w/2)
    if mixed:  # each feature turned by its column of a table of the other layout, against its own partner
        columns = np.repeat(ang, 2, axis=-1) if convention == "half" else np.concatenate([ang, ang], axis=-1)
        if convention == "half":
            partner = np.concatenate([-t[..., w // 2:], t[..., : w // 2]], axis=-1)
        else:
            partner = np.empty_like(t)
            partner[..., 0::2], partner[..., 1::2] = -t[..., 1::2], t[..., 0::2]
        return t * np.cos(columns) + partner * np.sin(columns)
    cos, sin = np.cos(ang), np.sin(ang)
    if convention == "interleaved":
        a, b = t[..., 0::2], t[..., 1::2]
        out = np.empty_like(t)
        out[..., 0::2] = a * cos - b * sin
        out[..., 1::2] = a * sin + b * cos
        return out
    if convention == "half":
        a, b = t[..., : w // 2], t[..., w // 2:]
        return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)
    raise ValueError(f"unknown rotary convention {convention!r}")


@dataclass(frozen=True)
class Rope:
    """The correct rotary embedding of a layer: its convention and base, applied per head after the split."""

    convention: str
    theta: float = THETA

    def apply(self, t: np.ndarray) -> np.ndarray:
        return rotate(t, self.convention, self.theta)

    def unapply(self, g: np.ndarray) -> np.ndarray:
        """The transpose of `apply` (a rotation's inverse): turns a gradient for the rotated tensor into one for the
        tensor before rotation."""
        return rotate(g, self.convention, self.theta, positions=-np.arange(g.shape[-2], dtype=float))

    def knobs(self) -> dict:
        """The same rotation as knobs of reference.variants.forward."""
        return {"rope": self.convention, "rope_theta": self.theta}

    def describe(self) -> str:
        how = "interleaved pairs (x0, x1), (x2, x3), ..." if self.convention.startswith("interleaved") else \
            "rotate-half pairs (x_i, x_i+dh/2)"
        if self.convention.endswith(NEGATED):
            how += (" turned by minus the usual angle (positions still enter the scores as t - s only: the usual "
                    "rotation with one coordinate of each pair of W_q's and W_k's rows negated)")
        return f"rotary position embedding, {how}, theta = {self.theta:g}"


def apply_knobs(q: np.ndarray, k: np.ndarray, v: np.ndarray, split, k_: dict):
    """variants.forward's rotary step: (Q, K, V) per head (B, H, n, dh) from the projections q, k, v (B, n, d), with
    `split(t, role)` the head split and `k_` the knobs: rope ("none" | "interleaved" | "half"), rope_theta,
    rope_values (the values rotated too), rope_keys (False: the keys left unrotated),
    rope_freqs ("head" | "model": frequencies from the model width),
    rope_where ("heads" | "before-split": rotated over the full width before the split), rope_key_shift (the keys'
    positions ahead of the queries' by this much)."""
    conv, theta, d = k_["rope"], k_["rope_theta"], q.shape[-1]
    if conv == "none":
        return split(q, "q"), split(k, "k"), split(v, "v")
    n = q.shape[-2]
    qpos = np.arange(n, dtype=float)
    kpos = qpos + k_["rope_key_shift"]
    roles = "q" + ("k" if k_["rope_keys"] else "") + ("v" if k_["rope_values"] else "")
    if k_["rope_where"] == "before-split":
        turned = {r: rotate(t, conv, theta, kpos if r == "k" else qpos) if r in roles else t
                  for r, t in zip("qkv", (q, k, v))}
        return tuple(split(turned[r], r) for r in "qkv")
    fw = d if k_["rope_freqs"] == "model" else None
    Q, K, V = split(q, "q"), split(k, "k"), split(v, "v")
    out = {r: rotate(T, conv, theta, kpos if r == "k" else qpos, fw) if r in roles else T
           for r, T in zip("qkv", (Q, K, V))}
    return out["q"], out["k"], out["v"]


def with_rope(knobs: dict, rope: Rope | None) -> dict:
    """A mistake's knobs on a layer whose rotary embedding is `rope`: the mistakes of the plain layer get the
    layer's rotation, the rotary mistakes the layer's convention and base; unchanged where `rope` is None."""
    if rope is None:
        return knobs
    return {**knobs, **rope.knobs()}
