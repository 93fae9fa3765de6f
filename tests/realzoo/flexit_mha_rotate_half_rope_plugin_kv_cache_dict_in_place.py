"""FlexiTransformers 0.3.0's MultiHeadAttention: "unified multi-head attention with pluggable positional encoding" -
MultiHeadAttention(d_model, n_heads, dropout=0.1, bias=True, pe=None), q_proj/k_proj/v_proj/out_proj nn.Linear
(biases by default), heads by view + transpose, a positional-encoding PLUGIN whose injection_point says where it acts
('qk': RotaryPE, a ROTATE-HALF rotary embedding with a float32 cos/sin cache, turned at q_offset / k_offset), scores
/ math.sqrt(head_dim), causality ONLY through the `mask` argument (a keep-mask, `mask == 0` filled with -inf; the
package's create_causal_mask gives a (1, 1, n, n) tril of True), and a KV CACHE that is a dict the caller makes
({} from init_kv_cache) and the layer FILLS IN PLACE (kv_cache['k'], kv_cache['v'] after the rotation), with
position_offset the number of tokens cached; forward returns the output alone.

Source: https://github.com/A-Elshahawy/FlexiTransformers (flexitransformers 0.3.0 on PyPI, the distribution's
Homepage), files flexit/attention/multi_head.py, flexit/attention/positional/base.py and
flexit/attention/positional/rotary.py as released in flexitransformers 0.3.0.
Licence: MIT (the wheel's METADATA "License: MIT" and licenses/LICENSE in its dist-info, "Copyright (c) 2025 Ahmed
Elshahawy").
Copied: verbatim from the PyPI wheel flexitransformers==0.3.0 (pip download --no-deps): base.py lines 1-41 (whole),
rotary.py lines 1-4 and 7-90 and multi_head.py lines 1-4 and 7-117.  Left out: the package-internal imports
(rotary.py line 6, multi_head.py line 6: PositionalEncoding is defined in this file), the other encodings, the layers
and models.
ADDED: this docstring, the constants and the factory make_flexit_rotary_attention at the end, which builds the layer
as the package's create_pe and DecoderOnly do for pe_type='rotary' (RotaryPE(head_dim * rope_percentage = head_dim,
max_seq_len, rope_base)), with attention dropout 0.
Truth: correct. Called as the package's CausalDecoderLayer calls it, (x, x, x, mask, kv_cache, position_offset) with
the causal keep-mask, out = the rotate-half rotary reference with the four biases, to relative 1e-7 (float32 angles),
no leak; a prompt of 4, then 2 tokens, then 1 with one dict kv_cache and position_offset = tokens cached (the
decode's mask: the new rows of the causal mask over every key) = the whole sequence (in _truth.py, with an
independent per-head loop).
"""
from abc import ABC, abstractmethod
from typing import Literal

from torch import Tensor, nn


class PositionalEncoding(ABC, nn.Module):
    """
    Abstract base class for positional encodings.

    Injection points:
    - "embedding": Applied to embeddings before attention (Sinusoidal)
    - "qk": Applied to Q, K after projection (RoPE)
    - "scores": Applied to attention scores (ALiBi, Relative)
    """

    @property
    @abstractmethod
    def injection_point(self) -> Literal['embedding', 'qk', 'scores']:
        """Where this positional encoding is applied."""
        ...

    def apply_to_embedding(self, x: Tensor) -> Tensor:
        """Apply to embeddings. Override for embedding-level PE."""
        return x

    def apply_to_qk(
        self,
        q: Tensor,
        k: Tensor,
        q_offset: int = 0,
        k_offset: int = 0,
    ) -> tuple[Tensor, Tensor]:
        """Apply to Q and K. Override for QK-level PE."""
        return q, k

    def apply_to_scores(
        self, scores: Tensor, q_len: int, k_len: int, q_offset: int = 0, query: Tensor | None = None
    ) -> Tensor:
        """Apply to attention scores. Override for score-level PE."""
        return scores


from typing import Literal

import torch
from torch import Tensor


class RotaryPE(PositionalEncoding):
    """Rotary Position Embedding (RoPE)."""

    @property
    def injection_point(self) -> Literal['embedding', 'qk', 'scores']:
        return 'qk'

    def __init__(
        self,
        dim: int,
        max_len: int = 2048,
        base: int = 10000,
    ) -> None:
        super().__init__()
        self.dim = dim
        self.max_len = max_len
        self.base = base

        # Precompute frequencies
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer('inv_freq', inv_freq)

        # Cache
        self._cos_cache: Tensor | None = None
        self._sin_cache: Tensor | None = None
        self._cache_len: int = 0

    def _build_cache(self, seq_len: int, device: torch.device) -> None:
        if (
            seq_len <= self._cache_len
            and self._cos_cache is not None
            and self._cos_cache.device == device
        ):
            return

        self._cache_len = max(seq_len, self.max_len)
        # Always build in float32 for numerical precision, cast to input dtype at apply time
        t = torch.arange(self._cache_len, device=device, dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq.to(device))  # type: ignore
        emb = torch.cat([freqs, freqs], dim=-1)

        self._cos_cache = emb.cos()[None, None, :, :]  # [1, 1, seq, dim]
        self._sin_cache = emb.sin()[None, None, :, :]

    def _rotate_half(self, x: Tensor) -> Tensor:
        x1, x2 = x[..., : x.size(-1) // 2], x[..., x.size(-1) // 2 :]
        return torch.cat([-x2, x1], dim=-1)

    def apply_to_qk(
        self,
        q: Tensor,
        k: Tensor,
        q_offset: int = 0,
        k_offset: int = 0,
    ) -> tuple[Tensor, Tensor]:
        """
        q, k: [batch, n_heads, seq_len, head_dim]
        """
        q_len, k_len = q.size(2), k.size(2)
        max_len = max(q_offset + q_len, k_offset + k_len)

        self._build_cache(max_len, q.device)

        # Get relevant slices and cast to input dtype for FP16/BF16 compatibility
        cos_q = self._cos_cache[:, :, q_offset : q_offset + q_len, : self.dim].to(q.dtype)  # type: ignore
        sin_q = self._sin_cache[:, :, q_offset : q_offset + q_len, : self.dim].to(q.dtype)  # type: ignore
        cos_k = self._cos_cache[:, :, k_offset : k_offset + k_len, : self.dim].to(q.dtype)  # type: ignore
        sin_k = self._sin_cache[:, :, k_offset : k_offset + k_len, : self.dim].to(q.dtype)  # type: ignore

        # Apply rotation (only to first `dim` dimensions)
        q_rope = q[..., : self.dim]
        k_rope = k[..., : self.dim]

        q_out = q_rope * cos_q + self._rotate_half(q_rope) * sin_q
        k_out = k_rope * cos_k + self._rotate_half(k_rope) * sin_k

        # Concat with non-rotated dims if any
        if self.dim < q.size(-1):
            q_out = torch.cat([q_out, q[..., self.dim :]], dim=-1)
            k_out = torch.cat([k_out, k[..., self.dim :]], dim=-1)

        return q_out, k_out


import math

import torch
from torch import Tensor, nn


class MultiHeadAttention(nn.Module):
    """
    Unified multi-head attention with pluggable positional encoding.

    Supports:
    - Self-attention (q=k=v)
    - Cross-attention (q from decoder, k,v from encoder)
    - All PE types via plugin
    - Optional KV cache for inference
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.1,
        bias: bool = True,
        pe: PositionalEncoding | None = None,
    ):
        super().__init__()
        assert d_model % n_heads == 0, 'd_model must be divisible by n_heads'

        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.scale = math.sqrt(self.head_dim)

        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

        self.dropout = nn.Dropout(dropout)
        self.pe = pe

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Tensor | None = None,
        kv_cache: dict | None = None,
        position_offset: int = 0,
    ) -> Tensor:
        """
        Args:
            query: [batch, q_len, d_model]
            key: [batch, k_len, d_model]
            value: [batch, v_len, d_model]
            mask: [batch, 1, q_len, k_len] or broadcastable
            kv_cache: Optional cache dict for inference
            position_offset: Position offset for cached generation

        Returns:
            output: [batch, q_len, d_model]
        """
        batch_size, q_len, _ = query.shape

        # Project
        q = self.q_proj(query)
        k = self.k_proj(key)
        v = self.v_proj(value)

        # Reshape NEW tokens to heads: [batch, n_heads, seq_len, head_dim]
        k_new_len = k.size(1)
        q = q.view(batch_size, q_len, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(batch_size, k_new_len, self.n_heads, self.head_dim).transpose(1, 2)
        v = v.view(batch_size, k_new_len, self.n_heads, self.head_dim).transpose(1, 2)

        # Apply QK-level PE (RoPE) to NEW Q and K only, before cache concat
        if self.pe is not None and self.pe.injection_point == 'qk':
            k_offset = 0 if kv_cache is None else position_offset
            q, k = self.pe.apply_to_qk(q, k, q_offset=position_offset, k_offset=k_offset)

        # Handle KV cache (keys already rotated; concat on dim=2 = seq dim)
        if kv_cache is not None:
            if 'k' in kv_cache:
                k = torch.cat([kv_cache['k'], k], dim=2)
                v = torch.cat([kv_cache['v'], v], dim=2)
            kv_cache['k'] = k
            kv_cache['v'] = v

        k_len = k.size(2)

        # Compute attention scores
        scores = torch.matmul(q, k.transpose(-2, -1)) / self.scale

        # Apply score-level PE (ALiBi, Relative)
        if self.pe is not None and self.pe.injection_point == 'scores':
            scores = self.pe.apply_to_scores(
                scores, q_len, k_len, q_offset=position_offset, query=q
            )

        # Apply mask (support both 3-D [B,1,S] and 4-D [B,1,q,k] masks)
        if mask is not None:
            if mask.dim() == 3:
                mask = mask.unsqueeze(1)  # [B, 1, q, k]
            scores = scores.masked_fill(mask == 0, float('-inf'))

        # Softmax and dropout
        attn = self.dropout(scores.softmax(dim=-1))

        # Apply attention to values
        out = torch.matmul(attn, v)

        # Reshape back: [batch, q_len, d_model]
        out = out.transpose(1, 2).contiguous().view(batch_size, q_len, self.d_model)

        return self.out_proj(out)


# --- added for the zoo: the constants and the factory ---
TARGET = "make_flexit_rotary_attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("positional-encoding-plugin", "rotate-half-rope-float32-cache", "mask-argument-only", "qkv-arguments",
             "kv-cache-dict-filled-in-place", "position-offset-argument", "no-context-length")
FORWARD = "query, key, value, mask=None, kv_cache=None, position_offset=0"
NOTES = ("make_flexit_rotary_attention(d_model, n_heads, context_length=None) = MultiHeadAttention(d_model, n_heads, "
         "0.0, True, RotaryPE(d_model // n_heads, max_len)), max_len = context_length or 2048")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("correct rotate-half rotary attention with biases, causal through the keep-mask argument, a "
                    "divisibility assert; its dict cache, filled in place with position_offset, decodes right")


def make_flexit_rotary_attention(d_model, n_heads, context_length=None):
    return MultiHeadAttention(d_model, n_heads, 0.0, True, RotaryPE(d_model // n_heads, context_length or 2048))
# --- end of the added part ---
