"""OpenLanguageModel 2.2.1's GroupedQueryAttention: q_proj / k_proj / v_proj / out_proj (a one-line nn.Linear
subclass), num_kv_heads key/value heads repeated by expand + reshape, interleaved-pair RoPE (a module whose sin/cos
tables are float32 non-persistent buffers of max_seq_len rows), F.scaled_dot_product_attention with is_causal=True
and no flag to turn it off; an optional `mask` of three conventions (bool keep, 0/1, additive) is turned into a
keep-mask and ANDed with a tril; fourteen constructor options (head_dim, qkv_bias, use_bias, use_qk_norm,
attention_scale, attn_logit_softcap, use_rope, partial_rotary_factor, use_attention_sink, ...).

Source: https://github.com/openlanguagemodel/openlanguagemodel (openlanguagemodel 2.2.1 on PyPI, the
distribution's Repository), files olm/nn/attention/gqa.py, olm/nn/attention/masks.py, olm/nn/torch_nn_wrappers.py,
olm/nn/embeddings/positional/base.py and olm/nn/embeddings/positional/rope.py as released in openlanguagemodel 2.2.1.
Licence: MIT (the wheel's METADATA "License-Expression: MIT" and LICENSE in its dist-info/licenses, "Copyright (c)
2025 OLM Contributors").
Copied: verbatim from the PyPI wheel openlanguagemodel==2.2.1 (pip download --no-deps): lines 1-2 and 4-5 of
olm/nn/attention/gqa.py (imports) and lines 14-245 (GroupedQueryAttention); lines 1-24 of olm/nn/attention/masks.py
(attention_mask_to_bool); lines 10-17 of olm/nn/torch_nn_wrappers.py (Linear); lines 2-5 and 8-46 of
olm/nn/embeddings/positional/base.py (PositionalEmbeddingBase); lines 2-3 and 7-89 of
olm/nn/embeddings/positional/rope.py (RotaryPositionalEmbedding).  Left out: the package imports.
ADDED: this entry's constants and two declared stand-ins, `RMSNorm` and `PartialRotaryPositionalEmbedding`, that
raise NotImplementedError: the package's classes are reached only with use_qk_norm=True or partial_rotary_factor < 1,
neither of which this entry uses.
Truth: correct: with use_bias=False (the default, no output bias) and qkv_bias=False, the grouped reference
gqa_forward with RoPE in interleaved pairs (base 10000) on q_proj, k_proj, v_proj and out_proj, for
num_kv_heads = num_heads, 1 and 2 (relative 1e-7: the sin/cos tables are float32); no leak, with or without a
mask hiding nothing.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from typing import Optional
import torch
import torch.nn as nn
from abc import ABC, abstractmethod
from typing import Optional
import torch
from typing import Optional, Literal
import torch.nn as nn

class Linear(nn.Linear):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
    
    def forward(self, x):
        return super().forward(x)

TARGET = "GroupedQueryAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-out-proj-bias-by-default", "gqa-expand-reshape", "interleaved-rope-float32-tables",
             "always-causal-sdpa", "mask-of-three-conventions")
FORWARD = "x, mask=None"
NOTES = ("GroupedQueryAttention(embed_dim, num_heads, num_kv_heads, max_seq_len, head_dim=None, dropout=0.0, "
         "rope_theta=10000.0, use_bias=False, qkv_bias=False, ...); forward(x, mask=None) -> (B, n, embed_dim).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("grouped attention with interleaved-pair RoPE, always causal: mha-check builds it with use_bias=True (the "
                    "output projection's bias flag), finds the grouped rotary reference and every check passes")


# ------------------------------------------------------------------------------------------- ADDED stand-ins
class RMSNorm(nn.Module):  # olm.nn.norms.RMSNorm, not copied: reached only with use_qk_norm=True
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("olm.nn.norms.RMSNorm is not part of this entry")


class PartialRotaryPositionalEmbedding(nn.Module):  # not copied: reached only with partial_rotary_factor < 1
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("olm's PartialRotaryPositionalEmbedding is not part of this entry")
# ------------------------------------------------------------------------------------------------------------
import torch


def attention_mask_to_bool(mask: torch.Tensor, device=None) -> torch.Tensor:
    """
    Convert common attention mask conventions to a boolean keep-mask.

    Supported conventions:
    - bool masks: True means attend, False means block.
    - binary numeric masks: 1 means attend, 0 means block.
    - additive masks: 0/non-negative means attend, negative or -inf means block.
    """
    if device is not None:
        mask = mask.to(device=device)

    if mask.dtype == torch.bool:
        return mask

    if torch.is_floating_point(mask):
        # Additive convention: attend where mask >= 0, block where mask < 0 (e.g. -inf).
        # Avoids data-dependent .item() for torch.compile compatibility.
        return mask >= 0

    return mask != 0

class PositionalEmbeddingBase(nn.Module, ABC):
    """
    Abstract base class for all positional embedding implementations.

    Positional embeddings add information about token positions in a sequence
    to help the model understand order and relative positions. Different positional
    embedding strategies have different properties:

    - Learned (Absolute): Simple, effective, but limited to max_seq_len
    - Sinusoidal: Deterministic, can extrapolate to longer sequences
    - RoPE: Applied to Q/K directly, enables relative position modeling
    - ALiBi: Adds bias to attention scores, excellent extrapolation

    All positional embedding implementations should inherit from this base class
    and implement the forward method.
    """

    @abstractmethod
    def forward(self, *args, **kwargs) -> torch.Tensor:
        """
        Apply positional information to input tensor(s).

        The signature and behavior of this method varies by implementation:
        - Some add to embeddings (Absolute, Sinusoidal)
        - Some rotate representations (RoPE)
        - Some return bias to add to attention scores (ALiBi)

        Returns:
            Transformed tensor(s) with positional information applied
        """
        pass

    def extra_repr(self) -> str:
        """
        String representation of the module for debugging.

        Override this in subclasses to provide useful information.
        """
        return ""

class RotaryPositionalEmbedding(PositionalEmbeddingBase):
    """
    Rotary Positional Embedding (RoPE) as described in
    “RoFormer: Enhanced Transformer with Rotary Position Embedding” (arXiv 2104.09864).

    This module precomputes sin/cos rotation frequencies for a given head‐dim, and then applies to
    query/key representations via interleaving real/imag parts (or equivalently pairs of dims).
    """

    def __init__(self, head_dim: int, max_seq_len: int, base: int = 10000):
        """
        Args:
            head_dim: the dimension per attention head (must be even)
            base: the base for geometric progression of frequencies
            max_seq_len: maximum sequence length to support (for cache)
        """
        super().__init__()
        if head_dim % 2 != 0:
            raise ValueError(f"head_dim must be even (got {head_dim})")
        self.head_dim = head_dim
        self.base = base
        self.max_seq_len = max_seq_len

        # precompute rotational frequencies
        inv_freq = 1.0 / (
            base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
        )
        # inv_freq shape: (head_dim/2,)
        # we store as buffer for caching
        self.register_buffer("inv_freq", inv_freq, persistent=False)

        # Eagerly pre-compute full sin/cos cache (torch.compile-friendly)
        t = torch.arange(max_seq_len, dtype=torch.float32)
        freqs = torch.einsum("i,j->ij", t, inv_freq)
        self.register_buffer("emb_sin", freqs.sin().unsqueeze(1), persistent=False)
        self.register_buffer("emb_cos", freqs.cos().unsqueeze(1), persistent=False)

    def forward(
        self, x: torch.Tensor, seq_positions: Optional[torch.LongTensor] = None
    ) -> torch.Tensor:
        """
        Apply rotary positional embedding to input tensor x.

        Args:
            x: shape (batch_size, seq_len, num_heads, head_dim)
            seq_positions: optional tensor of shape (batch_size, seq_len) with position indices.
                If None, assumes positions are 0..seq_len-1 for each batch.

        Returns:
            Tensor of same shape as x, with RoPE applied.
        """
        b, seq_len, n_heads, head_dim = x.shape
        assert (
            head_dim == self.head_dim
        ), f"Expected head_dim={self.head_dim}, got {head_dim}"

        if seq_positions is None:
            pos = (
                torch.arange(seq_len, dtype=torch.long, device=x.device)
                .unsqueeze(0)
                .expand(b, seq_len)
            )
        else:
            pos = seq_positions

        sin = self.emb_sin[pos].to(dtype=x.dtype)  # (batch, seq_len, 1, head_dim/2)
        cos = self.emb_cos[pos].to(dtype=x.dtype)

        # apply to x — interleave halves of head_dim into pairs
        # split x into even/odd dims: (x_even, x_odd)
        x = x.view(b, seq_len, n_heads, head_dim // 2, 2)
        x_even = x[..., 0]  # (b, s, n_h, head_dim/2)
        x_odd = x[..., 1]

        # apply rotation: (x_even * cos − x_odd * sin, x_even * sin + x_odd * cos)
        # result shape: (b, s, n_h, head_dim/2, 2)
        x_rot_even = x_even * cos - x_odd * sin
        x_rot_odd = x_even * sin + x_odd * cos

        x_rot = torch.stack((x_rot_even, x_rot_odd), dim=-1)  # shape (..., 2)
        x_rot = x_rot.view(b, seq_len, n_heads, head_dim)

        return x_rot

class GroupedQueryAttention(nn.Module):
    """
    Grouped Query Attention (GQA) with Rotary Positional Embeddings.

    GQA is a distinct attention mechanism where the number of Key/Value heads is smaller
    than the number of Query heads. This reduces memory bandwidth usage during inference
    (smaller KV cache) while maintaining performance close to Multi-Head Attention (MHA).

    If num_kv_heads == num_heads, this is equivalent to MHA.
    If num_kv_heads == 1, this is equivalent to Multi-Query Attention (MQA).

    Args:
        embed_dim (int): Total dimension of the model.
        num_heads (int): Number of Query heads.
        num_kv_heads (int): Number of Key/Value heads. Must divide num_heads.
        max_seq_len (int): Maximum sequence length for RoPE.
        dropout (float, optional): Dropout probability. Defaults to 0.0.
        rope_theta (float, optional): Base frequency for RoPE. Defaults to 10000.0.
        use_bias (bool, optional): Whether to use bias in linear projections. Defaults to False.
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_kv_heads: int,
        max_seq_len: int,
        head_dim: Optional[int] = None,
        dropout: float = 0.0,
        rope_theta: float = 10000.0,
        use_bias: bool = False,
        qkv_bias: bool = False,
        use_qk_norm: bool = False,
        rms_norm_eps: float = 1e-6,
        attention_scale: Optional[float] = None,
        attn_logit_softcap: Optional[float] = None,
        use_rope: bool = True,
        partial_rotary_factor: float = 1.0,
        use_attention_sink: bool = False,
    ):
        super().__init__()

        # If head_dim is not provided, assume standard division
        if head_dim is None:
            if embed_dim % num_heads != 0:
                raise ValueError(
                    f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})"
                )
            self.head_dim = embed_dim // num_heads
        else:
            self.head_dim = head_dim

        if num_heads % num_kv_heads != 0:
            raise ValueError(
                f"num_heads ({num_heads}) must be divisible by num_kv_heads ({num_kv_heads})"
            )

        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.num_groups = num_heads // num_kv_heads

        self.q_dim = num_heads * self.head_dim
        self.kv_dim = num_kv_heads * self.head_dim

        self.dropout_p = dropout
        self.scale = attention_scale if attention_scale is not None else self.head_dim**-0.5
        self.attn_logit_softcap = attn_logit_softcap
        self.use_rope = use_rope
        self.use_attention_sink = use_attention_sink

        if not 0.0 < partial_rotary_factor <= 1.0:
            raise ValueError(
                "partial_rotary_factor must be in (0.0, 1.0], "
                f"got {partial_rotary_factor}"
            )

        # QK Norm (Qwen 2/2.5 feature)
        self.use_qk_norm = use_qk_norm
        if use_qk_norm:
            self.q_norm = RMSNorm(self.head_dim, eps=rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, eps=rms_norm_eps)

        if use_rope:
            if partial_rotary_factor < 1.0:
                self.rope = PartialRotaryPositionalEmbedding(
                    self.head_dim,
                    rotary_percentage=partial_rotary_factor,
                    base=rope_theta,
                    max_seq_len=max_seq_len,
                )
            else:
                self.rope = RotaryPositionalEmbedding(
                    self.head_dim, max_seq_len, base=rope_theta
                )
        else:
            self.rope = None

        if use_attention_sink:
            self.attention_sink = nn.Parameter(torch.zeros(num_heads))
        else:
            self.register_parameter("attention_sink", None)

        # Projections
        self.q_proj = Linear(
            embed_dim, self.q_dim, bias=qkv_bias
        )  # torch.nn.Linear can also be used
        self.k_proj = Linear(
            embed_dim, self.kv_dim, bias=qkv_bias
        )  # torch.nn.Linear can also be used
        self.v_proj = Linear(
            embed_dim, self.kv_dim, bias=qkv_bias
        )  # torch.nn.Linear can also be used
        self.out_proj = Linear(
            self.q_dim, embed_dim, bias=use_bias
        )  # torch.nn.Linear can also be used

        self.dropout = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, mask: Optional[torch.Tensor] = None
    ) -> torch.Tensor:
        """
        Forward pass of Grouped Query Attention.

        Args:
            x (torch.Tensor): Input tensor of shape [batch, seq_len, embed_dim].
            mask (torch.Tensor, optional): Attention mask of shape [batch, 1, seq_len, seq_len]
                or [batch, seq_len, seq_len]. Defaults to None.

        Returns:
            torch.Tensor: Output tensor of shape [batch, seq_len, embed_dim].
        """
        B, N, C = x.shape

        # Project projections
        # q: [B, N, num_heads * head_dim]
        # k, v: [B, N, num_kv_heads * head_dim]
        q = self.q_proj(x)
        k = self.k_proj(x)
        v = self.v_proj(x)

        # Reshape to [B, N, Heads, D]
        q = q.view(B, N, self.num_heads, self.head_dim)
        k = k.view(B, N, self.num_kv_heads, self.head_dim)
        v = v.view(B, N, self.num_kv_heads, self.head_dim)

        # Apply QK Norm if enabled (per head, before RoPE)
        if self.use_qk_norm:
            q = self.q_norm(q)
            k = self.k_norm(k)

        if self.rope is not None:
            q = self.rope(q)
            k = self.rope(k)

        # Transpose for attention: [B, Heads, N, D]
        q = q.transpose(1, 2)
        k = k.transpose(1, 2)
        v = v.transpose(1, 2)

        # Expand K and V to match num_heads if needed (GQA replication)
        if self.num_groups > 1:
            k = k[:, :, None, :, :].expand(
                B, self.num_kv_heads, self.num_groups, N, self.head_dim
            )
            k = k.reshape(B, self.num_heads, N, self.head_dim)

            v = v[:, :, None, :, :].expand(
                B, self.num_kv_heads, self.num_groups, N, self.head_dim
            )
            v = v.reshape(B, self.num_heads, N, self.head_dim)

        attn_mask = None
        is_causal = True
        if mask is not None:
            attn_mask = attention_mask_to_bool(mask, device=x.device)
            causal_mask = torch.ones(N, N, device=x.device, dtype=torch.bool).tril()
            attn_mask = attn_mask & causal_mask
            is_causal = False

        if self.attn_logit_softcap is None and not self.use_attention_sink:
            # Scaled Dot Product Attention
            # Uses Flash Attention optimization if available via F.scaled_dot_product_attention
            attention_out = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=attn_mask,
                dropout_p=self.dropout_p if self.training else 0.0,
                is_causal=is_causal,
                scale=self.scale,
            )
        else:
            attn_scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
            if self.attn_logit_softcap is not None:
                softcap = self.attn_logit_softcap
                attn_scores = torch.tanh(attn_scores / softcap) * softcap

            if is_causal:
                causal_mask = torch.ones(N, N, device=x.device, dtype=torch.bool).tril()
                attn_mask = causal_mask if attn_mask is None else attn_mask & causal_mask

            if attn_mask is not None:
                attn_scores = attn_scores.masked_fill(~attn_mask, float("-inf"))

            if self.use_attention_sink:
                sink_scores = self.attention_sink.view(1, self.num_heads, 1, 1)
                sink_scores = sink_scores.expand(B, self.num_heads, N, 1)
                attn_scores = torch.cat([attn_scores, sink_scores], dim=-1)
                sink_values = torch.zeros(
                    B,
                    self.num_heads,
                    1,
                    self.head_dim,
                    dtype=v.dtype,
                    device=v.device,
                )
                values = torch.cat([v, sink_values], dim=-2)
            else:
                values = v

            attn_probs = F.softmax(attn_scores, dim=-1)
            attn_probs = self.dropout(attn_probs)
            attention_out = torch.matmul(attn_probs, values)

        # [B, Heads, N, D] -> [B, N, Heads, D] -> [B, N, num_heads * head_dim]
        attention_out = (
            attention_out.transpose(1, 2).contiguous().view(B, N, self.q_dim)
        )

        return self.out_proj(attention_out)
