"""EKA-1's CausalSelfAttention: a Llama-style layer behind a config dataclass - q_proj/k_proj/v_proj/o_proj with one
`bias` flag (False by default), grouped-query attention by `n_kv_heads` (repeat_interleave), rotate-half RoPE whose
cos/sin tables (float32) are non-persistent buffers of a RotaryEmbedding submodule built for `context_length`
positions, SDPA with is_causal=True, head_dim a property of the config (d_model // n_heads).

Source: https://github.com/subhash9705/eka-ai (the repository the wheel's METADATA names), files eka_ai/model.py and
eka_ai/config.py as released in eka-ai 1.0.4 on PyPI.
Licence: Apache-2.0 (the wheel's METADATA "License: Apache-2.0" and its dist-info licenses/LICENSE, "Copyright 2024
EKA-AI Contributors").
Copied: verbatim from the PyPI wheel eka-ai==1.0.4 (pip download --no-deps; the wheel's CRLF line endings written
as LF): lines 12-16 of eka_ai/model.py (the __future__ import and torch imports) and lines 48-161 (RotaryEmbedding,
_rotate_half, _apply_rotary, CausalSelfAttention); line 10 of eka_ai/config.py (the dataclasses import) and lines
13-74 (EKAConfig up to its head_dim property; its json (de)serialisation helpers are left out, and with them `import
json`). model.py's line 18 (`from eka_ai.config import EKAConfig`) is replaced by the copied dataclass.
ADDED: this entry's constants, and below the copied block a factory eka_attention(d_model, n_heads, context_length,
n_kv_heads=None, bias=False) that fills EKAConfig and builds the layer, as TransformerBlock does with its config.
Truth: correct. The output is rope_mha_forward(convention="half") with W_q = q_proj, and k_proj / v_proj repeated per
group of n_heads // n_kv_heads query heads (query head h uses key/value head h // group), W_o = o_proj (and the
biases with bias=True), for 2, 1 and 4 key/value heads of 4 query heads, to relative 1e-5 (the RoPE tables are
float32); no leak.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "CausalSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("config-dataclass", "gqa-n-kv-heads", "rotate-half-rope-float32-buffers", "one-bias-flag-default-false")
FORWARD = "x"
NOTES = ("CausalSelfAttention(EKAConfig(d_model, n_heads, n_kv_heads, context_length, bias, rope_base, dropout)). "
         "forward(x) -> (B, n, d_model); SDPA is_causal=True, RoPE for positions 0..n-1.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("a correct grouped rotate-half rotary layer (RoPE tables float32); its config dataclass refuses "
                    "a d_model the heads do not divide (__post_init__), and with bias=True every projection has a "
                    "bias: every check must pass")


@dataclass
class EKAConfig:
    """
    Configuration for EKA-1 decoder-only transformer.

    All defaults correspond to the released 109M checkpoint.

    Attributes
    ----------
    vocab_size : int
        Size of the token vocabulary (SentencePiece BPE, 32 000 tokens).
    n_layers : int
        Number of transformer decoder blocks.
    n_heads : int
        Number of query attention heads.
    n_kv_heads : int
        Number of key/value heads (equals n_heads for MHA; < n_heads for GQA).
    d_model : int
        Hidden/embedding dimension.
    d_ffn : int
        Feed-forward inner dimension **before** SwiGLU halving.
        The actual up/gate projections use ``d_ffn`` units; the true hidden
        dimension after SwiGLU gating is also ``d_ffn`` (gate ⊙ up → down).
    context_length : int
        Maximum sequence length the model was trained with.
    dropout : float
        Dropout probability (0.0 at inference).
    bias : bool
        Whether linear projections include bias terms.
    rope_base : int
        Base frequency for Rotary Position Embeddings.
    norm_eps : float
        Epsilon for RMSNorm numerical stability.
    """

    vocab_size: int = 32_000
    n_layers: int = 12
    n_heads: int = 12
    n_kv_heads: int = 12
    d_model: int = 768
    d_ffn: int = 3_072
    context_length: int = 512
    dropout: float = 0.0
    bias: bool = False
    rope_base: int = 10_000
    norm_eps: float = 1e-5

    # ── Aliases for legacy checkpoints that used different key names ──────────
    # These are handled in from_dict() so the dataclass itself stays clean.

    def __post_init__(self) -> None:
        if self.n_kv_heads > self.n_heads:
            raise ValueError(f"n_kv_heads ({self.n_kv_heads}) must be <= n_heads ({self.n_heads})")
        if self.d_model % self.n_heads != 0:
            raise ValueError(
                f"d_model ({self.d_model}) must be divisible by n_heads ({self.n_heads})"
            )

    @property
    def head_dim(self) -> int:
        """Dimension of each attention head."""
        return self.d_model // self.n_heads


class RotaryEmbedding(nn.Module):
    """
    Pre-computed Rotary Position Embeddings (RoPE).

    Caches cos/sin tables up to ``max_seq_len`` at construction time.
    The cache is stored as a buffer (moves to device with the module).

    References
    ----------
    Su et al. (2021) "RoFormer: Enhanced Transformer with Rotary Position Embedding"
    https://arxiv.org/abs/2104.09864
    """

    def __init__(self, head_dim: int, max_seq_len: int, base: int = 10_000) -> None:
        super().__init__()
        # Inverse frequencies: shape (head_dim // 2,)
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

        # Pre-compute cos/sin tables: shape (1, 1, max_seq_len, head_dim)
        t = torch.arange(max_seq_len, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)  # (max_seq_len, head_dim // 2)
        emb = torch.cat([freqs, freqs], dim=-1)  # (max_seq_len, head_dim)
        self.register_buffer("cos_cache", emb.cos()[None, None, :, :], persistent=False)
        self.register_buffer("sin_cache", emb.sin()[None, None, :, :], persistent=False)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        seq_len: int,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        cos = self.cos_cache[:, :, :seq_len, :]
        sin = self.sin_cache[:, :, :seq_len, :]
        return _apply_rotary(q, cos, sin), _apply_rotary(k, cos, sin)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    """Rotate the second half of the last dimension to implement RoPE."""
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def _apply_rotary(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
) -> torch.Tensor:
    """Apply rotary embeddings to tensor ``x``."""
    return x * cos + _rotate_half(x) * sin


# ─────────────────────────────────────────────────────────────────────────────
# Attention
# ─────────────────────────────────────────────────────────────────────────────


class CausalSelfAttention(nn.Module):
    """
    Multi-Head Causal Self-Attention with Rotary Position Embeddings.

    Uses ``torch.nn.functional.scaled_dot_product_attention`` (SDPA) which
    automatically selects FlashAttention when available, falling back to the
    efficient memory-saving kernel or the reference implementation.

    Supports Grouped-Query Attention (GQA) when ``n_kv_heads < n_heads``;
    for the released checkpoint ``n_kv_heads == n_heads`` (standard MHA).
    """

    def __init__(self, config: EKAConfig) -> None:
        super().__init__()
        self.n_heads = config.n_heads
        self.n_kv_heads = config.n_kv_heads
        self.head_dim = config.head_dim
        self.n_rep = config.n_heads // config.n_kv_heads  # GQA repeat factor

        self.q_proj = nn.Linear(config.d_model, config.n_heads * self.head_dim, bias=config.bias)
        self.k_proj = nn.Linear(config.d_model, config.n_kv_heads * self.head_dim, bias=config.bias)
        self.v_proj = nn.Linear(config.d_model, config.n_kv_heads * self.head_dim, bias=config.bias)
        self.o_proj = nn.Linear(config.n_heads * self.head_dim, config.d_model, bias=config.bias)

        self.rope = RotaryEmbedding(self.head_dim, config.context_length, config.rope_base)
        self.attn_dropout = config.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape

        # Project and reshape to (B, n_heads, T, head_dim)
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)

        # Apply RoPE
        q, k = self.rope(q, k, T)

        # Expand KV heads for GQA (no-op when n_rep == 1)
        if self.n_rep > 1:
            k = k.repeat_interleave(self.n_rep, dim=1)
            v = v.repeat_interleave(self.n_rep, dim=1)

        # PyTorch SDPA — uses FlashAttention / memory-efficient / math kernel
        dropout_p = self.attn_dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=None,
            dropout_p=dropout_p,
            is_causal=True,
        )

        # Reassemble: (B, T, d_model)
        out = out.transpose(1, 2).contiguous().view(B, T, self.n_heads * self.head_dim)
        return self.o_proj(out)


# --- ADDED for the zoo: the layer built from its config, as TransformerBlock builds it ---
def eka_attention(d_model, n_heads, context_length, n_kv_heads=None, bias=False):
    config = EKAConfig(d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads or n_heads,
                       context_length=context_length, bias=bias)
    return CausalSelfAttention(config)
