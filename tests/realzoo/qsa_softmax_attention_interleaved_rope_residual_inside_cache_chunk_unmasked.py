"""qsa-attention 0.2.0's SoftmaxAttention: the softmax baseline of "Quantum Self-Attention" (QSA), written so the
paper's comparisons swap only the attention mechanism - SoftmaxAttention(d_model, n_heads, dropout=0.0, causal=True,
use_rope=True), separate q/k/v/o nn.Linear WITH biases, heads by view + transpose, an INTERLEAVED ("rotate every
two") rotary embedding on q and k: apply_phase_rope treats each channel pair (2j, 2j+1) of a head as a complex number
and turns it by pos * base ** (-2j / d_k) (inverse frequencies and angles in float32), scores / sqrt(d_k), a causal
mask made in forward (tril of ones == 0 filled with -inf) ONLY when `self.causal and k.shape[2] == T`, an optional
key padding mask, the RESIDUAL INSIDE: forward returns x + 0.9 * o(attention) (res_scale), and a KV cache object
(ComplexKVCache) passed as past_kv and returned when use_cache=True.

Source: https://github.com/ElBalor/QSA (qsa-attention 0.2.0 on PyPI, the distribution's Homepage), files
qsa/baseline.py, qsa/rope.py and qsa/cache.py as released in qsa-attention 0.2.0.
Licence: MIT (the wheel's METADATA "License: MIT" and licenses/LICENSE in its dist-info, "Copyright (c) 2026 Heylel
Yaka (Eric Heylel Danjuma Yaka)").
Copied: verbatim from the PyPI wheel qsa_attention==0.2.0 (pip download --no-deps): qsa/rope.py lines 1-51 (the
whole file: import torch, apply_phase_rope), qsa/cache.py lines 6-52 (ComplexKVCache; line 1 `from __future__
import annotations` is this file's first line below the docstring, line 3 its `import torch`), qsa/baseline.py
lines 7-77 (imports, SoftmaxAttention).  REPLACED: baseline.py line 44 `from .rope import apply_phase_rope` and line
73 `from .cache import ComplexKVCache` (relative imports inside forward, which a single file cannot make), each by
`pass` - the two names are defined in this file, marked.  Left out: SoftmaxDecoderBlock and the QSA (complex)
attention.
ADDED: nothing but this docstring, the constants and the two marked replacements.
Truth: bug, in the cache only. Without a cache, out = x + 0.9 * (the interleaved rotary reference with q/k/v/o's
biases), to relative 1e-7 (float32 angles), no leak (in _truth.py, with an independent per-head loop; the rotate-half
convention differs).  With a cache, the causal mask is made only when the keys number the new tokens
(k.shape[2] == T): a chunk of 2 new tokens after a cached prompt is attended WITHOUT a mask - its first token reads
the second - while one token per call is right (nothing later to hide).
"""
from __future__ import annotations
import torch


def apply_phase_rope(r, i, positions, base=10000.0):
    """Complex-native rotary position embedding (phase rotation).

    Each per-head channel pair (c_{2j}, c_{2j+1}) is treated as a complex
    number and rotated by theta_{pos, j} = pos / base^(2j/d):

        c_j' = c_j * e^{i * theta_{pos, j}}

    This is exactly RoPE, derived natively in complex space: rotating Q by
    pos_q and K by pos_k makes the Hermitian product depend only on the
    *relative* offset (pos_q - pos_k), because e^{i theta_q} * conj(e^{i
    theta_k}) = e^{i (theta_q - theta_k)}.

    Args:
        r, i: (..., T, d_k) real/imag streams of Q or K (rotation happens in
            adjacent channel pairs, matching RoPE's pairing).
        positions: (T,) int64 absolute positions of each slot.
        base: wavelength base (same role as RoPE's theta base).

    Returns:
        (r_rot, i_rot) rotated streams, same shapes.
    """
    head_dim = r.shape[-1]
    if head_dim % 2 != 0:
        raise ValueError("phase RoPE requires an even per-head dimension")
    half = head_dim // 2

    inv_freq = 1.0 / (base ** (torch.arange(0, half, device=r.device, dtype=torch.float32) * 2.0 / head_dim))
    theta = positions.to(device=r.device, dtype=torch.float32).unsqueeze(-1) * inv_freq  # (T, half)

    cos_t = torch.cos(theta)
    sin_t = torch.sin(theta)

    # Pair adjacent channels: (2j, 2j+1) as complex numbers
    r_even, r_odd = r[..., 0::2], r[..., 1::2]
    i_even, i_odd = i[..., 0::2], i[..., 1::2]

    # c = (r_even + i r_odd); multiply by (cos + i sin):
    #   new r_even = r_even cos - r_odd sin; new r_odd = r_even sin + r_odd cos
    #   imaginary stream rotates with the same rotation
    r_even_new = r_even * cos_t - r_odd * sin_t
    r_odd_new = r_even * sin_t + r_odd * cos_t
    i_even_new = i_even * cos_t - i_odd * sin_t
    i_odd_new = i_even * sin_t + i_odd * cos_t

    r_out = torch.stack([r_even_new, r_odd_new], dim=-1).flatten(-2)
    i_out = torch.stack([i_even_new, i_odd_new], dim=-1).flatten(-2)
    return r_out, i_out


class ComplexKVCache:
    """Complex KV cache for efficient autoregressive QSA generation.

    Stores the phase-rotated complex keys and values per layer,

        (k_r, k_i, v_r, v_i)  each of shape (B, h, S, d_k),

    where S is the current sequence length, and appends new slots
    incrementally. This lets QSA attend to the full generation history
    without recomputing: exactly the "complex KV cache" of the paper's
    novelty list, generalized to the complex streams the mechanism needs.
    """

    def __init__(self, batch_size: int, n_heads: int, d_k: int, device=None, dtype=torch.float32):
        self.batch_size = batch_size
        self.n_heads = n_heads
        self.d_k = d_k
        self.device = device
        self.dtype = dtype
        self.k_r = self.k_i = self.v_r = self.v_i = None
        self.length = 0

    def __len__(self) -> int:
        return self.length

    @torch.no_grad()
    def update(self, k_r, k_i, v_r, v_i) -> None:
        """Append new key/value slots: each (B, h, T_new, d_k)."""
        if self.k_r is None:
            self.k_r, self.k_i = k_r.clone(), k_i.clone()
            self.v_r, self.v_i = v_r.clone(), v_i.clone()
        else:
            self.k_r = torch.cat([self.k_r, k_r], dim=2)
            self.k_i = torch.cat([self.k_i, k_i], dim=2)
            self.v_r = torch.cat([self.v_r, v_r], dim=2)
            self.v_i = torch.cat([self.v_i, v_i], dim=2)
        self.length = self.k_r.shape[2]

    def get(self):
        """Current (k_r, k_i, v_r, v_i), each (B, h, S, d_k)."""
        return self.k_r, self.k_i, self.v_r, self.v_i

    def positions(self, new_len: int, device=None) -> torch.Tensor:
        """Absolute positions of the ``new_len`` incoming slots: S, S+1, ..."""
        return torch.arange(
            self.length, self.length + new_len, device=device or self.k_r.device
        )


TARGET = "SoftmaxAttention"
TRUTH = "bug"
BUG = "kv-cache-chunk-unmasked"
RULE_GAPS = ("residual-inside-res-scale-0.9", "interleaved-rope-float32-angles", "causal-flag-in-constructor",
             "kv-cache-object-argument", "qkvo-biases", "no-context-length")
FORWARD = "x, attention_mask=None, past_kv=None, use_cache=False, rope_base=10000.0"
NOTES = ("returns x + 0.9 * o(attention); with use_cache=True, (that, past_kv) - a ComplexKVCache made on the first "
         "call and handed back, mutated in place")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'kvcache-chunk-unmasked'
EXPECTED_BECAUSE = ("a chunk of 2 new tokens after a cached prompt is attended with no mask (the mask is made only "
                    "when k.shape[2] == T): its first token's output moves with the second's input, a leak any "
                    "decode shows without reading the weights; one token per call is right")

import math
import torch
import torch.nn as nn


class SoftmaxAttention(nn.Module):
    """Softmax attention returning (real, imag) streams.

    The imaginary stream is returned unchanged (zero) so it can serve as a
    drop-in swap for QSAttention inside QSDecoderBlock — the paper's
    "same body, only the mechanism differs" comparison.
    """

    def __init__(self, d_model, n_heads, dropout=0.0, causal=True, use_rope=True, **_):
        super().__init__()
        assert d_model % n_heads == 0
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.causal = causal
        self.use_rope = use_rope

        self.q = nn.Linear(d_model, d_model)
        self.k = nn.Linear(d_model, d_model)
        self.v = nn.Linear(d_model, d_model)
        self.o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)
        self.res_scale = 0.9

    def forward(self, x, attention_mask=None, past_kv=None, use_cache=False, rope_base=10000.0):
        B, T, C = x.shape
        q = self.q(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        k = self.k(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        v = self.v(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)

        # Real-only RoPE (rotate pairs) so positional handling matches QSA
        if self.use_rope:
            pass  # --- zoo: line 44 was `from .rope import apply_phase_rope` (defined above) ---
            zero_i = torch.zeros_like(q)
            if past_kv is not None:
                q_pos = k_pos = past_kv.positions(T, device=x.device)
            else:
                q_pos = k_pos = torch.arange(T, device=x.device)
            q_r, _ = apply_phase_rope(q, zero_i, q_pos, base=rope_base)
            k_r, _ = apply_phase_rope(k, zero_i, k_pos, base=rope_base)
            q, k = q_r, k_r

        if past_kv is not None:
            past_kv.update(k, torch.zeros_like(k), v, torch.zeros_like(v))
            k, _, v, _ = past_kv.get()

        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        if self.causal and k.shape[2] == T:
            causal_mask = torch.tril(torch.ones(T, T, device=x.device, dtype=x.dtype)).view(1, 1, T, T)
            scores = scores.masked_fill(causal_mask == 0, float("-inf"))
        if attention_mask is not None:
            key_mask = attention_mask.to(x.dtype).bool().view(B, 1, 1, -1)
            scores = scores.masked_fill(~key_mask, float("-inf"))
        a = torch.softmax(scores, dim=-1)
        a = self.dropout(a)
        out = (a @ v).transpose(1, 2).contiguous().view(B, T, C)
        out = self.o(out)

        result = x + self.res_scale * out
        if use_cache:
            if past_kv is None:
                pass  # --- zoo: line 73 was `from .cache import ComplexKVCache` (defined above) ---
                past_kv = ComplexKVCache(B, self.n_heads, self.d_k, device=x.device, dtype=x.dtype)
                past_kv.update(k, torch.zeros_like(k), v, torch.zeros_like(v))
            return result, past_kv
        return result
