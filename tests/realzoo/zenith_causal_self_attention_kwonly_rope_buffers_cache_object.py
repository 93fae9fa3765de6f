"""zenith-nlp 1.1.0's CausalSelfAttention: the decoder attention of "a from-scratch generative NLP library" -
KEYWORD-ONLY CausalSelfAttention(*, embed_dim, num_heads, block_size, dropout=0.0, rope=True, use_sdpa=False), a
ValueError for a width the heads do not divide, ONE fused qkv nn.Linear split by width, a proj nn.Linear (biases),
a (1, 1, L, L) tril buffer named `mask`, a ROTATE-HALF rotary embedding from registered cos/sin buffers (computed in
float32), rows offset:offset + seq, scores / math.sqrt(head_dim), masked_fill(mask == 0, -inf); a KV cache OBJECT of
the package's own (KVCache(num_layers), update(layer_idx, k, v) returning every key and value so far) passed as
`cache=` with `layer_idx` and `offset` (tokens cached), the mask then made from positions (k_pos > q_pos); an
optional SDPA path with the same semantics.

Source: https://github.com/cattolatte/zenith-nlp-framework (zenith-nlp 1.1.0 on PyPI, the distribution's Homepage),
file zenith/models/decoder.py as released in zenith-nlp 1.1.0.
Licence: MIT (the wheel's METADATA "License: MIT" and licenses/LICENSE in its dist-info, "Copyright (c) 2025 K Satya
Sai Nischal").
Copied: verbatim from the PyPI wheel zenith_nlp==1.1.0 (pip download --no-deps): lines 19-26 of
zenith/models/decoder.py (imports), lines 64-94 (KVCache), lines 129-145 (_rope_tables, _rotate_half, _apply_rope) and
lines 173-250 (CausalSelfAttention).  Left out: the config, the norms, the feed-forwards, the blocks and the model.
ADDED: this docstring and the constants.
Truth: correct. out = the rotate-half rotary reference with qkv's three row blocks and proj, with biases, to relative
1e-7 (float32 tables), no leak; a prompt of 4, then 2 tokens, then 1, with one KVCache(1) and offset = tokens cached
= the whole sequence; the interleaved convention differs (in _truth.py, with an independent per-head loop).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


class KVCache:
    """Per-layer key/value cache for incremental autoregressive decoding."""

    def __init__(self, num_layers: int) -> None:
        self._k: list[torch.Tensor | None] = [None] * num_layers
        self._v: list[torch.Tensor | None] = [None] * num_layers
        self.length = 0

    def update(
        self, layer_idx: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        past_k, past_v = self._k[layer_idx], self._v[layer_idx]
        if past_k is None:
            self._k[layer_idx], self._v[layer_idx] = k, v
        else:
            self._k[layer_idx] = torch.cat([past_k, k], dim=2)
            self._v[layer_idx] = torch.cat([past_v, v], dim=2)
        return self._k[layer_idx], self._v[layer_idx]

    def truncate(self, length: int) -> None:
        """Drop cached positions beyond ``length`` (roll back rejected drafts).

        Speculative decoding verifies several draft tokens in one pass but may
        accept only a prefix; the rejected positions must be removed so the cache
        again reflects exactly the committed sequence.
        """
        for layer_idx, (k, v) in enumerate(zip(self._k, self._v)):
            if k is not None:
                self._k[layer_idx] = k[:, :, :length, :]
                self._v[layer_idx] = v[:, :, :length, :]
        self.length = min(self.length, length)


TARGET = "CausalSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("keyword-only-constructor", "fused-qkv-split", "rotate-half-rope-buffers-float32", "mask-buffer-named-mask",
             "kv-cache-object-of-its-own", "offset-argument", "sdpa-option")
FORWARD = "x, *, cache=None, layer_idx=0, offset=0"
NOTES = ("CausalSelfAttention(*, embed_dim, num_heads, block_size, dropout=0.0, rope=True, use_sdpa=False); the cache "
         "is a KVCache(num_layers) the caller makes")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("correct rotate-half rotary attention with biases (every check of the math passes); its KV cache "
                    "is a KVCache object the caller makes (cache.update(layer_idx, k, v)), which mha-check cannot "
                    "make: kv-cache cannot tell, saying so")


def _rope_tables(head_dim: int, max_len: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Precompute (cos, sin) of shape ``(max_len, head_dim)`` for RoPE."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
    positions = torch.arange(max_len).float()
    freqs = torch.outer(positions, inv_freq)  # (max_len, head_dim/2)
    emb = torch.cat([freqs, freqs], dim=-1)  # (max_len, head_dim)
    return emb.cos(), emb.sin()


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def _apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: (batch, heads, seq, head_dim); cos/sin: (seq, head_dim)
    return x * cos + _rotate_half(x) * sin


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention, optionally with rotary embeddings."""

    mask: torch.Tensor
    rope_cos: torch.Tensor
    rope_sin: torch.Tensor

    def __init__(
        self, *, embed_dim: int, num_heads: int, block_size: int, dropout: float = 0.0,
        rope: bool = True, use_sdpa: bool = False,
    ) -> None:
        super().__init__()
        if embed_dim % num_heads != 0:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.rope = rope
        self.use_sdpa = use_sdpa
        self.dropout_p = dropout

        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)
        self.attn_dropout = nn.Dropout(dropout)
        self.proj_dropout = nn.Dropout(dropout)

        causal = torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)
        self.register_buffer("mask", causal)
        if rope:
            cos, sin = _rope_tables(self.head_dim, block_size)
            self.register_buffer("rope_cos", cos)
            self.register_buffer("rope_sin", sin)

    def forward(
        self, x: torch.Tensor, *, cache: KVCache | None = None, layer_idx: int = 0, offset: int = 0
    ) -> torch.Tensor:
        batch, seq, embed = x.shape
        q, k, v = self.qkv(x).split(embed, dim=2)
        q = q.view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)

        if self.rope:
            cos = self.rope_cos[offset : offset + seq]
            sin = self.rope_sin[offset : offset + seq]
            q, k = _apply_rope(q, cos, sin), _apply_rope(k, cos, sin)

        if cache is not None:
            k, v = cache.update(layer_idx, k, v)
        total = k.size(2)

        if self.use_sdpa:
            out = self._sdpa(q, k, v, seq=seq, total=total, offset=offset, cache=cache)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
            if cache is None:
                scores = scores.masked_fill(self.mask[:, :, :seq, :seq] == 0, float("-inf"))
            else:
                q_pos = torch.arange(offset, offset + seq, device=x.device).unsqueeze(1)
                k_pos = torch.arange(total, device=x.device).unsqueeze(0)
                scores = scores.masked_fill((k_pos > q_pos).view(1, 1, seq, total), float("-inf"))
            weights = self.attn_dropout(torch.softmax(scores, dim=-1))
            out = weights @ v

        out = out.transpose(1, 2).contiguous().view(batch, seq, embed)
        return self.proj_dropout(self.proj(out))

    def _sdpa(self, q, k, v, *, seq, total, offset, cache):
        """PyTorch's fused attention, with the same causal semantics as the eager path."""
        dropout_p = self.dropout_p if self.training else 0.0
        if cache is None:  # full parallel forward: standard causal mask
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout_p)
        if seq == 1:  # single-step decode: attend to all cached keys
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
        # Multi-token step with a cache (e.g. speculative verify): explicit mask.
        q_pos = torch.arange(offset, offset + seq, device=q.device).unsqueeze(1)
        k_pos = torch.arange(total, device=q.device).unsqueeze(0)
        attn_mask = (k_pos <= q_pos).view(1, 1, seq, total)  # True = attend
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p)
