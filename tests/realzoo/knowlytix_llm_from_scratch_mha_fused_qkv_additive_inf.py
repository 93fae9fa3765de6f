"""llm-from-scratch's MultiHeadCausalSelfAttention (Chapter 10 of Knowlytix's book-style course): spelled-out
constructor MultiHeadCausalSelfAttention(embedding_dim, num_heads, block_size, dropout=0.0), a ValueError for an
indivisible width and for a sequence longer than block_size, ONE bias-free fused qkv_proj chunked [Q; K; V], heads by
view + transpose(1, 2), a module-level scaled_dot_product_attention that ADDS a float mask, the mask a non-persistent
buffer of 0 and -inf (causal_mask: triu(diagonal=1) filled with -inf), a bias-free out_proj, dropout after the merge;
forward(x, return_weights=False) returns (y, weights) when asked.

Source: https://github.com/knowlytix/llm-from-scratch (llm-from-scratch 0.1.0 on PyPI, the distribution's Homepage),
file llm_from_scratch/models/attention.py as released in llm-from-scratch 0.1.0.
Licence: Apache-2.0 (the wheel's METADATA classifier "License :: OSI Approved :: Apache Software License", LICENSE
and NOTICE in its dist-info; NOTICE: "llm-from-scratch / Copyright 2026 Knowlytix.").
Copied: verbatim from the PyPI wheel llm-from-scratch==0.1.0 (pip download --no-deps): lines 8-13 of
llm_from_scratch/models/attention.py (imports), lines 16-54 (scaled_dot_product_attention), lines 85-101
(causal_mask) and lines 141-192 (MultiHeadCausalSelfAttention).  Left out: SingleHeadAttention,
SingleHeadCausalSelfAttention, mha_forward_with_cache and the two toy language models.
ADDED: this entry's constants.
Truth: correct: mha_forward with qkv_proj's three row blocks as W_q, W_k, W_v (no biases) and W_o = out_proj, exactly
(exp(-inf) = 0); no leak (in _truth.py).
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn


TARGET = "MultiHeadCausalSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("spelled-out-embedding-dim", "fused-qkv-chunk", "additive-inf-mask-buffer", "no-qkv-bias",
             "no-out-proj-bias", "optional-weights-output")
FORWARD = "x, return_weights=False"
NOTES = ("MultiHeadCausalSelfAttention(embedding_dim, num_heads, block_size, dropout=0.0); forward(x) -> (B, T, "
         "embedding_dim)")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'out-proj-no-bias'
EXPECTED_BECAUSE = ("the lesson's math with spelled-out names, a fused bias-free [Q; K; V] projection and an additive "
                    "0/-inf causal buffer; its out_proj has bias=False, a lesson rule it does not follow")


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    return_weights: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Scaled dot-product attention.

    Computes

    .. math::

        \alpha_{ij} = \softmax\!\left(\frac{q_i \cdot k_j}{\sqrt{d_k}} + M_{ij}\right),
        \qquad \text{out}_i = \sum_j \alpha_{ij} v_j.

    Parameters
    ----------
    q:
        Query tensor of shape ``(..., Tq, dk)``.
    k:
        Key tensor of shape ``(..., Tk, dk)``.
    v:
        Value tensor of shape ``(..., Tk, dv)``.
    mask:
        Optional additive mask of shape broadcastable to ``(..., Tq, Tk)``.
        Use ``float('-inf')`` for positions to block.
    return_weights:
        If True, also return attention weights ``(..., Tq, Tk)``.
    """
    dk = q.size(-1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dk)
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    out = weights @ v
    if return_weights:
        return out, weights
    return out


def causal_mask(
    block_size: int,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Return an upper-triangular ``-inf`` mask of shape ``(block_size, block_size)``.

    Position ``i`` is allowed to attend to positions ``0..i``. Adding this
    mask to attention scores before softmax sets the disallowed positions
    to zero weight.
    """
    mask = torch.zeros(block_size, block_size, dtype=dtype, device=device)
    mask = mask.masked_fill(
        torch.triu(torch.ones(block_size, block_size, dtype=torch.bool, device=device), diagonal=1),
        float("-inf"),
    )
    return mask


class MultiHeadCausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with a fused QKV projection.

    Splits ``embedding_dim`` across ``num_heads`` heads each of size
    ``head_dim = embedding_dim // num_heads``. Each head runs scaled
    dot-product attention with the same causal mask; the outputs are
    concatenated and projected back to ``embedding_dim``.
    """

    def __init__(
        self,
        embedding_dim: int,
        num_heads: int,
        block_size: int,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if embedding_dim % num_heads != 0:
            raise ValueError(
                f"embedding_dim ({embedding_dim}) must be divisible by num_heads ({num_heads})"
            )
        self.embedding_dim = embedding_dim
        self.num_heads = num_heads
        self.head_dim = embedding_dim // num_heads
        self.block_size = block_size
        self.qkv_proj = nn.Linear(embedding_dim, 3 * embedding_dim, bias=False)
        self.out_proj = nn.Linear(embedding_dim, embedding_dim, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", causal_mask(block_size), persistent=False)

    def forward(
        self, x: torch.Tensor, return_weights: bool = False
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        B, T, D = x.shape
        if T > self.block_size:
            raise ValueError(f"sequence length {T} exceeds block_size {self.block_size}")
        # Fused QKV; split into three tensors.
        qkv = self.qkv_proj(x)  # (B, T, 3*D)
        q, k, v = qkv.chunk(3, dim=-1)
        # Reshape each into per-head form: (B, num_heads, T, head_dim).
        q = q.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        mask = self.mask[:T, :T]
        if return_weights:
            out, weights = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)
            # out: (B, num_heads, T, head_dim) -> (B, T, D)
            out = out.transpose(1, 2).contiguous().view(B, T, D)
            return self.out_proj(self.dropout(out)), weights
        out = scaled_dot_product_attention(q, k, v, mask=mask)
        out = out.transpose(1, 2).contiguous().view(B, T, D)
        return self.out_proj(self.dropout(out))
