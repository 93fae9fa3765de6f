"""attn-res 0.1.0's GroupedQueryAttention: the attention of Kye Gomez's single-file "Attention Residuals" transformer
- GroupedQueryAttention(cfg) with a TransformerConfig dataclass (d_model, n_heads, n_kv_heads=2, max_seq_len,
rope_theta; d_head and n_kv_groups properties), spelled-out bias-free w_q, w_k, w_v, w_o Linears, the key/value heads
repeated by unsqueeze(3).expand(...).reshape (each key/value head serving n_kv_groups CONSECUTIVE query heads), RoPE
by complex multiplication (`torch.view_as_complex(x.float()...)`, in float32 whatever the input), and causality ONLY
through an additive `mask` argument (the model builds `torch.full((T, T), -inf).triu(1)`); forward(x, rope_freqs,
mask=None) with the RoPE table required.

Source: https://github.com/kyegomez/attn_res (attn-res 0.1.0 on PyPI, the repository the distribution's
Project-URL names), file attn_res/main.py as released in attn-res 0.1.0.
Licence: the wheel's METADATA says "License: MIT" (classifier "License :: OSI Approved :: MIT License") while the
LICENSE in its dist-info is the Apache License 2.0 text (no copyright line filled in); permissive either way, author
Kye Gomez.
Copied: verbatim from the PyPI wheel attn-res==0.1.0 (pip download --no-deps): lines 93-103 of attn_res/main.py
(imports), lines 110-189 (AttnResMode, TransformerConfig) and lines 256-380 (precompute_rope_freqs, apply_rope,
GroupedQueryAttention).  Left out: RMSNorm, RMSNormNoWeight, SwiGLUFFN, the AttnRes operator and layers, the model
and its inference helpers (the model's causal mask is `_build_causal_mask`, lines 634-647, not copied).
ADDED: this entry's constants.
Truth: correct given the model's inputs.  With rope_freqs = precompute_rope_freqs(d_head, T, theta) and the additive
causal mask, it is the grouped-query layer with interleaved-pair RoPE (consecutive features (2i, 2i+1) turned by
pos * theta^(-2i/d_head)): gqa_forward with rope_mha's interleaved rotation, to float32 precision (the rotation runs
in float32); with n_kv_heads = n_heads and no RoPE (freqs all 1) mha_forward exactly.  Without the mask it is
bidirectional, by design (in _truth.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

TARGET = "GroupedQueryAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("config-object-constructor", "grouped-query", "rope-table-from-caller", "causal-only-through-mask-arg",
             "additive-inf-mask-arg", "float32-rope", "no-biases")
FORWARD = "x, rope_freqs, mask=None"
NOTES = ("GroupedQueryAttention(cfg) with TransformerConfig(d_model=512, n_heads=8, n_kv_heads=2, max_seq_len=2048, "
         "rope_theta=10000.0, ...); forward(x, rope_freqs, mask=None) -> (B, T, d_model); rope_freqs a complex "
         "(T, d_head // 2) table from precompute_rope_freqs; causal only with the additive (1, 1, T, T) -inf mask.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = "forward needs rope_freqs (a complex RoPE table) from the caller, and causality comes only by mask"

class AttnResMode(Enum):
    """Which Attention Residual variant to use."""

    NONE = "none"  # Standard residual connections
    FULL = "full"  # Full AttnRes: attend over all previous layer outputs
    BLOCK = "block"  # Block AttnRes: attend over block-level representations


@dataclass
class TransformerConfig:
    """Configuration for the Transformer with Attention Residuals and GQA.

    Attributes:
        d_model: Hidden dimension of the model.
        n_layers: Total number of transformer sub-layers (each Attn and MLP
            counts as one layer, so a standard transformer block = 2 layers).
        n_heads: Number of query attention heads.
        n_kv_heads: Number of key/value heads for Grouped Query Attention.
            Must divide ``n_heads``. When ``n_kv_heads == n_heads`` this is
            standard MHA; when ``n_kv_heads == 1`` this is Multi-Query Attention.
        vocab_size: Size of the token vocabulary.
        max_seq_len: Maximum sequence length for positional encodings.
        ffn_mult: Multiplier for the feed-forward hidden dimension
            (``d_ff = ffn_mult * d_model``).
        dropout: Dropout probability applied after attention and FFN.
        attn_res_mode: Which Attention Residual variant to use.
        n_blocks: Number of AttnRes blocks (only used when
            ``attn_res_mode == BLOCK``). Layers are evenly divided.
        eps: Epsilon for RMSNorm.
        rope_theta: Base frequency for Rotary Position Embeddings.
    """

    d_model: int = 512
    n_layers: int = 16  # total sub-layers (attn + mlp)
    n_heads: int = 8
    n_kv_heads: int = 2  # GQA groups
    vocab_size: int = 32000
    max_seq_len: int = 2048
    ffn_mult: float = 2.667  # ≈ 8/3 for SwiGLU
    dropout: float = 0.0
    attn_res_mode: AttnResMode = AttnResMode.BLOCK
    n_blocks: int = 8
    eps: float = 1e-6
    rope_theta: float = 10000.0

    def __post_init__(self) -> None:
        assert self.n_heads % self.n_kv_heads == 0, (
            f"n_heads ({self.n_heads}) must be divisible by "
            f"n_kv_heads ({self.n_kv_heads})"
        )
        assert self.d_model % self.n_heads == 0, (
            f"d_model ({self.d_model}) must be divisible by "
            f"n_heads ({self.n_heads})"
        )
        if self.attn_res_mode == AttnResMode.BLOCK:
            assert self.n_blocks >= 1, "n_blocks must be >= 1"

    @property
    def d_head(self) -> int:
        """Dimension per attention head."""
        return self.d_model // self.n_heads

    @property
    def n_kv_groups(self) -> int:
        """Number of query heads per KV group."""
        return self.n_heads // self.n_kv_heads

    @property
    def d_ff(self) -> int:
        """Feed-forward intermediate dimension (rounded to multiple of 8)."""
        raw = int(self.ffn_mult * self.d_model)
        return ((raw + 7) // 8) * 8  # align for GPU efficiency

    @property
    def block_size(self) -> int:
        """Number of sub-layers per AttnRes block."""
        if self.attn_res_mode != AttnResMode.BLOCK:
            return self.n_layers
        return self.n_layers // self.n_blocks



def precompute_rope_freqs(
    dim: int,
    max_seq_len: int,
    theta: float = 10000.0,
    device: Optional[torch.device] = None,
) -> Tensor:
    """Precompute complex-valued RoPE frequencies.

    Args:
        dim: Head dimension (must be even).
        max_seq_len: Maximum sequence length to precompute for.
        theta: Base frequency.
        device: Target device.

    Returns:
        Complex tensor of shape ``(max_seq_len, dim // 2)`` containing
        the rotation factors ``exp(i * pos * freq)``.
    """
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, device=device).float() / dim))
    positions = torch.arange(max_seq_len, device=device).float()
    angles = torch.outer(positions, freqs)  # [max_seq_len, dim//2]
    return torch.polar(torch.ones_like(angles), angles)  # e^{i*angle}


def apply_rope(x: Tensor, freqs: Tensor) -> Tensor:
    """Apply Rotary Position Embedding to query or key tensor.

    Args:
        x: Tensor of shape ``(B, T, H, d_head)``.
        freqs: Precomputed complex frequencies of shape ``(T, d_head // 2)``.

    Returns:
        Rotated tensor of the same shape.
    """
    # Reshape to complex pairs
    x_complex = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    freqs = freqs.unsqueeze(0).unsqueeze(2)  # [1, T, 1, d_head//2]
    x_rotated = x_complex * freqs
    return torch.view_as_real(x_rotated).reshape_as(x).to(x.dtype)


# =============================================================================
# Grouped Query Attention (GQA)
# =============================================================================


class GroupedQueryAttention(nn.Module):
    """Multi-Head Grouped Query Attention.

    Supports the full spectrum from Multi-Head Attention (n_kv_heads == n_heads)
    to Multi-Query Attention (n_kv_heads == 1) and everything in between.

    Each KV group is shared across ``n_heads // n_kv_heads`` query heads.

    Args:
        cfg: Transformer configuration.
    """

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg

        self.w_q = nn.Linear(cfg.d_model, cfg.n_heads * cfg.d_head, bias=False)
        self.w_k = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.d_head, bias=False)
        self.w_v = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.d_head, bias=False)
        self.w_o = nn.Linear(cfg.n_heads * cfg.d_head, cfg.d_model, bias=False)
        self.attn_dropout = nn.Dropout(cfg.dropout)

    def forward(
        self,
        x: Tensor,
        rope_freqs: Tensor,
        mask: Optional[Tensor] = None,
    ) -> Tensor:
        """Compute grouped query attention.

        Args:
            x: Input tensor of shape ``(B, T, d_model)``.
            rope_freqs: RoPE frequencies of shape ``(T, d_head // 2)``.
            mask: Optional causal mask of shape ``(1, 1, T, T)`` or broadcastable.

        Returns:
            Output tensor of shape ``(B, T, d_model)``.
        """
        B, T, _ = x.shape
        cfg = self.cfg

        # Project to Q, K, V
        q = self.w_q(x).view(B, T, cfg.n_heads, cfg.d_head)
        k = self.w_k(x).view(B, T, cfg.n_kv_heads, cfg.d_head)
        v = self.w_v(x).view(B, T, cfg.n_kv_heads, cfg.d_head)

        # Apply RoPE
        q = apply_rope(q, rope_freqs)
        k = apply_rope(k, rope_freqs)

        # Expand KV heads to match query heads
        # Each KV group serves (n_heads // n_kv_heads) query heads
        if cfg.n_kv_heads != cfg.n_heads:
            k = k.unsqueeze(3).expand(B, T, cfg.n_kv_heads, cfg.n_kv_groups, cfg.d_head)
            k = k.reshape(B, T, cfg.n_heads, cfg.d_head)
            v = v.unsqueeze(3).expand(B, T, cfg.n_kv_heads, cfg.n_kv_groups, cfg.d_head)
            v = v.reshape(B, T, cfg.n_heads, cfg.d_head)

        # Transpose for attention: (B, H, T, d_head)
        q = q.transpose(1, 2)
        k = k.transpose(1, 2)
        v = v.transpose(1, 2)

        # Scaled dot-product attention
        scale = 1.0 / math.sqrt(cfg.d_head)
        attn_weights = torch.matmul(q, k.transpose(-2, -1)) * scale  # [B, H, T, T]

        if mask is not None:
            attn_weights = attn_weights + mask

        attn_weights = F.softmax(attn_weights, dim=-1)
        attn_weights = self.attn_dropout(attn_weights)

        out = torch.matmul(attn_weights, v)  # [B, H, T, d_head]
        out = out.transpose(1, 2).contiguous().view(B, T, cfg.n_heads * cfg.d_head)

        return self.w_o(out)


