"""flatbuild's Attention ("Train conversational language models from scratch"): grouped-query attention with its own
vocabulary (hidden_dim, n_heads, n_kv_heads, optional head_dim), q_proj/k_proj/v_proj/o_proj without bias by
default, a RotaryEmbedding module whose cos/sin tables (rotate-half, float32 inverse frequencies) are REGISTERED
buffers of max_seq_len rows, a KEYWORD-ONLY forward(x, *, past_kv=None, attention_mask=None) that returns
(output, (k, v)), k and v repeated with repeat_interleave, and the causal mask built in forward from positions with
the cache offset (key j kept for query i iff j <= i + T_k - T_q), filled with -inf; softmax in float32.

Source: https://github.com/flatseek/flatbuild (the PyPI project's repository), files
flatbuild/models/layers/rope.py and flatbuild/models/layers/attention.py as released in flatbuild 0.1.1 on PyPI.
Licence: Apache-2.0 (the wheel's METADATA "License: Apache-2.0"; the Apache License 2.0 text in its dist-info,
licenses/LICENSE, with no copyright line filled in).
Copied: verbatim from the PyPI wheel flatbuild==0.1.1 (pip download --no-deps): the whole of rope.py (lines 1-131; line 1,
its docstring, as a comment)
and lines 12-165 of attention.py (AttentionConfig, Attention); attention.py's lines 1-11 (its docstring and the same
imports, and `from flatbuild.models.layers.rope import RotaryEmbedding, apply_rope`, defined above here) are left
out. ADDED: this entry's constants after rope.py's imports.
Truth: correct. Attention(hidden_dim, n_heads, n_kv_heads) called as m(x)[0] is the grouped rotate-half rotary
reference with W_q = q_proj, W_k = k_proj and W_v = v_proj repeated per group, W_o = o_proj (and their biases with
bias=True), to relative 1e-7 (float32 tables) for 2, 1 and 4 key/value heads of 4; no leak; the cache gives the same
rows. One `bias` flag for all four projections (with bias=True the output projection has the lesson's bias);
a width not divisible by n_heads is refused (head_dim * n_heads != hidden_dim raises ValueError).
"""
# """Rotary Position Embeddings (RoPE)."""
# (rope.py line 1, its docstring, kept as a comment: `from __future__` must come first)

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Tuple

import torch
from torch import nn

TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("gqa-n-kv-heads", "rope-rotate-half-registered-tables", "keyword-only-forward", "tuple-output",
             "kv-cache-argument", "mask-from-positions-with-offset", "float32-softmax", "no-out-proj-bias")
FORWARD = "x, *, past_kv=None, attention_mask=None"
NOTES = ("Attention(hidden_dim, n_heads, n_kv_heads, head_dim=None, rope_theta=10000.0, max_seq_len=4096, "
         "rope_scaling=None, bias=False, dropout=0.0, sliding_window=None). forward(x, *, past_kv=None, "
         "attention_mask=None) -> (out (B, T, hidden_dim), (k, v)).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("grouped-query attention with rotate-half RoPE, its mask made in forward with the cache offset: "
                    "built with bias=True (one flag for all four projections) every check passes, the KV cache too")


@dataclass
class RopeConfig:
    """Configuration for :class:`RotaryEmbedding`."""

    head_dim: int
    base: float = 10000.0
    scaling: dict | None = None

    def __post_init__(self) -> None:
        if self.head_dim % 2 != 0:
            raise ValueError(f"RoPE head_dim must be even, got {self.head_dim}")


class RotaryEmbedding(nn.Module):
    """Sinusoidal rotary embeddings (Su et al., 2021).

    The cache precomputes ``cos``/``sin`` tables for every (position,
    dim) pair up to ``max_seq_len``. During attention we apply them as
    a per-pair rotation.
    """

    def __init__(
        self,
        head_dim: int,
        base: float = 10000.0,
        max_seq_len: int = 4096,
        scaling: dict | None = None,
        device: torch.device | str | None = None,
    ) -> None:
        """Initialize the rotary cache.

        Args:
            head_dim: Per-head dimension (``hidden_dim // n_heads``).
            base: Exponential base of the sinusoid.
            max_seq_len: Maximum expected sequence length.
            scaling: Optional scaling dict (e.g. ``{"type": "linear",
                "factor": 2.0}``). Currently ``None`` — Linear scaling
                could be implemented here.
            device: Device on which to place the cache.
        """
        super().__init__()
        if head_dim % 2 != 0:
            raise ValueError(f"head_dim must be even, got {head_dim}")
        self.head_dim = head_dim
        self.base = base
        self.max_seq_len = max_seq_len
        self.scaling = scaling or {}

        inv_freq = 1.0 / (
            base ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim)
        )
        # Linear scaling (LLaMA-style): simply rescale positions.
        if scaling and scaling.get("type") == "linear":
            factor = float(scaling.get("factor", 1.0))
            inv_freq = inv_freq / factor

        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self._build_cache(max_seq_len, device)

    def _build_cache(self, max_seq_len: int, device: torch.device | str | None) -> None:
        """Pre-compute cos / sin for positions up to ``max_seq_len``."""
        t = torch.arange(max_seq_len, device=device, dtype=self.inv_freq.dtype)
        freqs = torch.outer(t, self.inv_freq)
        # Different from the original implementation: we rotate pairs
        # at positions ``[i, i + head_dim/2]`` rather than interleaving.
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos().to(torch.get_default_dtype()), persistent=False)
        self.register_buffer("sin_cached", emb.sin().to(torch.get_default_dtype()), persistent=False)
        self.max_seq_len = max_seq_len

    def forward(self, x: torch.Tensor, seq_len: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Return ``(cos, sin)`` sliced to the needed ``seq_len``.

        Args:
            x: Query or key tensor (used only to infer dtype/device).
            seq_len: Number of tokens in the current sequence.

        Returns:
            Tuple ``(cos, sin)`` of shape ``(seq_len, head_dim)``.
        """
        if seq_len > self.max_seq_len:
            self._build_cache(seq_len, x.device)
        cos = self.cos_cached[:seq_len].to(x.dtype)
        sin = self.sin_cached[:seq_len].to(x.dtype)
        return cos, sin


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Swap the two halves of ``x`` along the last axis.

    Equivalent to RoPE's per-pair rotation.
    """
    head = x.shape[-1] // 2
    x1, x2 = x[..., :head], x[..., head:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(
    q: torch.Tensor,
    k: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Apply rotary embeddings to ``q`` and ``k``.

    Args:
        q: Query tensor of shape ``(... , seq, head_dim)``.
        k: Key tensor of shape ``(... , seq, head_dim)``.
        cos, sin: Tensors of shape ``(seq, head_dim)``.

    Returns:
        Tuple of rotated ``(q, k)``.
    """
    # Add batch dim so broadcasting works for non-batched calls.
    cos = cos.unsqueeze(0)
    sin = sin.unsqueeze(0)
    q_rot = q * cos + rotate_half(q) * sin
    k_rot = k * cos + rotate_half(k) * sin
    return q_rot, k_rot



@dataclass
class AttentionConfig:
    """Static configuration for :class:`Attention`."""

    hidden_dim: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    dropout: float = 0.0
    rope: RotaryEmbedding | None = None
    bias: bool = False
    sliding_window: int | None = None


class Attention(nn.Module):
    """Grouped-Query Attention.

    Q has ``n_heads`` heads; K and V have ``n_kv_heads`` heads (each KV
    head is repeated ``n_heads // n_kv_heads`` times). RoPE is applied
    to the rotated halves of the last axis. When ``past_kv`` is passed
    in, the present K/V is concatenated to it (for autoregressive
    inference with a KV cache).
    """

    def __init__(
        self,
        hidden_dim: int,
        n_heads: int,
        n_kv_heads: int,
        head_dim: int | None = None,
        rope_theta: float = 10000.0,
        max_seq_len: int = 4096,
        rope_scaling: dict | None = None,
        bias: bool = False,
        dropout: float = 0.0,
        sliding_window: int | None = None,
    ) -> None:
        """Initialize attention layers.

        Args:
            hidden_dim: Model hidden dimension.
            n_heads: Number of query heads.
            n_kv_heads: Number of key/value heads (GQA).
            head_dim: Per-head dimension. Defaults to ``hidden_dim // n_heads``.
            rope_theta: RoPE base.
            max_seq_len: Maximum expected sequence length.
            rope_scaling: Optional RoPE scaling dict.
            bias: Whether to include bias on projections.
            dropout: Attention dropout.
            sliding_window: Optional sliding-window length.
        """
        super().__init__()
        if n_heads % n_kv_heads != 0:
            raise ValueError(f"n_heads ({n_heads}) must be divisible by n_kv_heads ({n_kv_heads})")
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.n_rep = n_heads // n_kv_heads
        self.head_dim = head_dim or hidden_dim // n_heads
        if self.head_dim * n_heads != hidden_dim:
            raise ValueError(
                f"hidden_dim ({hidden_dim}) must equal n_heads * head_dim ({n_heads * self.head_dim})"
            )

        self.q_proj = nn.Linear(hidden_dim, n_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden_dim, n_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden_dim, n_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(n_heads * self.head_dim, hidden_dim, bias=bias)

        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(0.0)

        self.rope = RotaryEmbedding(
            head_dim=self.head_dim,
            base=rope_theta,
            max_seq_len=max_seq_len,
            scaling=rope_scaling,
        )
        self.sliding_window = sliding_window

    def forward(
        self,
        x: torch.Tensor,
        *,
        past_kv: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Run attention.

        Args:
            x: Tensor of shape ``(B, T, hidden_dim)``.
            past_kv: Optional cached ``(K, V)`` from a previous step.
            attention_mask: Optional additive attention mask of
                shape ``(B, T_total)`` with values ``0`` / ``-inf``.

        Returns:
            ``(output, present_kv)`` where ``output`` has the same shape
            as ``x`` and ``present_kv`` is the new cache ``(K, V)``.
        """
        B, T, _ = x.shape

        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)

        # RoPE: apply only to the *current* T positions, offset by the
        # cache length so positions line up with the full sequence.
        past_len = past_kv[0].shape[2] if past_kv is not None else 0
        full_len = past_len + T
        cos_all, sin_all = self.rope(x, full_len)
        cos = cos_all[past_len:full_len]
        sin = sin_all[past_len:full_len]
        q, k = apply_rope(q, k, cos, sin)

        # KV cache concatenation: cache stores *post-RoPE* k so the
        # past rows retain the right position offsets.
        if past_kv is not None:
            past_k, past_v = past_kv
            k = torch.cat([past_k, k], dim=2)
            v = torch.cat([past_v, v], dim=2)

        present_kv = (k, v)

        # Repeat KV heads for GQA so we get ``(B, n_heads, T, head_dim)``.
        if self.n_rep > 1:
            k = k.repeat_interleave(self.n_rep, dim=1)
            v = v.repeat_interleave(self.n_rep, dim=1)

        # Scaled dot-product attention with optional causal mask.
        scale = 1.0 / math.sqrt(self.head_dim)
        attn_scores = torch.matmul(q, k.transpose(-1, -2)) * scale
        T_q = q.shape[2]
        T_k = k.shape[2]
        # Build the causal mask. Query position ``i`` (in [0, T_q))
        # attends to key position ``j`` (in [0, T_k)) iff
        # ``j <= offset + i`` where ``offset = T_k - T_q``.
        offset = T_k - T_q
        q_idx = torch.arange(T_q, device=x.device).unsqueeze(1)
        k_idx = torch.arange(T_k, device=x.device).unsqueeze(0)
        keep = k_idx <= q_idx + offset   # bool, True => attend
        attn_scores = attn_scores.masked_fill(~keep, float("-inf"))

        if attention_mask is not None:
            attn_scores = attn_scores + attention_mask

        attn_weights = torch.softmax(attn_scores, dim=-1, dtype=torch.float32).to(q.dtype)
        attn_weights = self.attn_dropout(attn_weights)

        out = torch.matmul(attn_weights, v)
        out = out.transpose(1, 2).contiguous().view(B, T, -1)
        out = self.o_proj(out)
        out = self.resid_dropout(out)
        return out, present_kv
