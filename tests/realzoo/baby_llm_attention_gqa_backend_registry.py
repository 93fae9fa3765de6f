"""baby-llm's Attention: multi-head / grouped-query self-attention whose softmax(QK^T)V is a free function looked
up BY NAME in a module-level registry (ATTENTION_BACKENDS, filled by a decorator: "eager" - explicit matmul, bool
tril mask, softmax in float32 - "sdpa", pinned "sdpa_math"/"sdpa_flash"/"sdpa_mem_efficient", and FlashAttention 2/3
when installed), chosen by the constructor's `backend` (default "sdpa") and overridable for every module at once by a
ContextVar; q_proj/k_proj/v_proj/o_proj Linear with bias=False by default, num_kv_heads key/value heads expanded by
repeat_kv (expand + reshape = repeat_interleave) inside the backend, a keyword-only forward(x, *, rope=None,
attn_mask=None) that takes (cos, sin) rotate-half tables from the caller and refuses an attn_mask on a causal module;
is_causal=True by default, divisibility checked with ValueError.

Source: https://github.com/700799/baby-llm (the PyPI project's homepage and repository), file
baby_llm/modules/attention.py as released in baby-llm 0.2.0 on PyPI.
Licence: MIT (Copyright (c) 2026 Baby LLM contributors), LICENSE in the wheel's dist-info.
Copied: verbatim from the PyPI wheel baby_llm==0.2.0 (pip download --no-deps): the whole file
baby_llm/modules/attention.py except its module docstring (lines 1-32, on how to register a Triton kernel; left out
because `from __future__ import annotations` must directly follow this file's own docstring). ADDED: this entry's
constants after the imports.
Truth: correct. Built with num_kv_heads = 2, 1 or 4 of 4 heads and called as m(x) it is the grouped-query reference
(query head h uses key/value head h // group) with q_proj, k_proj, v_proj, o_proj, exactly (1e-10) with the default
"sdpa" backend and to relative 1e-7 with "eager" (float32 softmax); with bias=True too; no leak. Its one `bias`
flag gives all four projections a bias or none: bound like the lesson's qkv_bias, bias=True is the lesson's layer
with qkv_bias=True exactly (the default bias=False drops the output projection's bias too).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("backend-registry-by-name", "gqa-num-kv-heads", "repeat-kv-in-backend", "keyword-only-forward",
             "rope-tables-from-caller", "sdpa-is-causal", "one-bias-flag-for-all-four", "no-context-length")
FORWARD = "x, *, rope=None, attn_mask=None"
NOTES = ("Attention(hidden_size, num_heads, num_kv_heads=None, *, bias=False, dropout=0.0, is_causal=True, "
         "backend='sdpa', softmax_scale=None). forward(x, *, rope=None, attn_mask=None) -> (B, S, hidden).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the grouped-query lesson layer through a registry of kernels; its one bias flag read as qkv_bias "
                    "gives the output projection its bias too")


class AttentionImpl(Protocol):
    """The one signature every attention backend implements."""

    def __call__(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        attn_mask: Tensor | None,
        dropout_p: float,
        is_causal: bool,
        scale: float,
    ) -> Tensor: ...


# ──────────────────────────────────────────────────────────────────────────────
# Registry
# ──────────────────────────────────────────────────────────────────────────────

ATTENTION_BACKENDS: dict[str, AttentionImpl] = {}

# Set only by force_attention_backend(); when not None it wins over every
# module's configured backend. A ContextVar so the override is scoped to the
# current thread/async context and cannot leak into concurrent work.
_FORCED_BACKEND: ContextVar[str | None] = ContextVar(
    "baby_llm_forced_attention_backend", default=None
)


def register_attention_backend(
    name: str, *, override: bool = False
) -> Callable[[AttentionImpl], AttentionImpl]:
    """Decorator: add an attention implementation to the registry under ``name``."""

    def decorator(impl: AttentionImpl) -> AttentionImpl:
        if name in ATTENTION_BACKENDS and not override:
            raise ValueError(
                f"attention backend {name!r} already registered; pass override=True to replace it"
            )
        ATTENTION_BACKENDS[name] = impl
        return impl

    return decorator


def available_attention_backends() -> tuple[str, ...]:
    return tuple(sorted(ATTENTION_BACKENDS))


def resolve_attention_backend(name: str) -> AttentionImpl:
    """Look up a backend, honoring an active :func:`force_attention_backend`."""
    forced = _FORCED_BACKEND.get()
    effective = forced if forced is not None else name
    try:
        return ATTENTION_BACKENDS[effective]
    except KeyError:
        raise KeyError(
            f"unknown attention backend {effective!r}; available: {available_attention_backends()}"
        ) from None


@contextmanager
def force_attention_backend(name: str) -> Iterator[None]:
    """Route *every* Attention module through ``name`` for the duration.

    Handy for A/B-ing a kernel against a reference without touching configs::

        with force_attention_backend("eager"):
            reference = model(batch)
    """
    if name not in ATTENTION_BACKENDS:
        raise KeyError(
            f"unknown attention backend {name!r}; available: {available_attention_backends()}"
        )
    token = _FORCED_BACKEND.set(name)
    try:
        yield
    finally:
        _FORCED_BACKEND.reset(token)


# ──────────────────────────────────────────────────────────────────────────────
# Shared helpers for backend authors
# ──────────────────────────────────────────────────────────────────────────────


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """Expand ``(B, kv_heads, S, D)`` to ``(B, kv_heads * n_rep, S, D)`` for GQA.

    ``torch.repeat_interleave`` on the head dim, written out explicitly so the
    memory cost of materializing the expansion is visible to the reader.
    """
    if n_rep == 1:
        return x
    batch, kv_heads, seq, head_dim = x.shape
    x = x[:, :, None, :, :].expand(batch, kv_heads, n_rep, seq, head_dim)
    return x.reshape(batch, kv_heads * n_rep, seq, head_dim)


def _rotate_half(x: Tensor) -> Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_emb(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    """Apply rotary position embeddings to ``q``/``k`` of shape ``(B, H, S, D)``.

    ``cos``/``sin`` have shape ``(S, D)`` — typically a slice of a precomputed
    cache (see ``RotaryEmbedding`` in the recipes).
    """
    cos = cos[None, None, :, :]
    sin = sin[None, None, :, :]
    return q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin


def _gqa_groups(q: Tensor, k: Tensor) -> int:
    return q.shape[1] // k.shape[1]


# ──────────────────────────────────────────────────────────────────────────────
# Built-in backends
# ──────────────────────────────────────────────────────────────────────────────


@register_attention_backend("eager")
def eager_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float,
) -> Tensor:
    """Reference implementation: explicit matmul → mask → softmax → dropout → matmul.

    Materializes the full ``(B, H, S, S)`` score matrix. Use it to debug numerics
    or validate a custom kernel, not to train anything large.
    """
    k = repeat_kv(k, _gqa_groups(q, k))
    v = repeat_kv(v, _gqa_groups(q, v))

    scores = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        seq = q.shape[-2]
        causal = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    probs = F.dropout(probs, p=dropout_p, training=dropout_p > 0.0)
    return probs @ v


def _sdpa(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float,
) -> Tensor:
    k = repeat_kv(k, _gqa_groups(q, k))
    v = repeat_kv(v, _gqa_groups(q, v))
    return F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale
    )


# Let PyTorch's dispatcher pick the fastest available fused kernel.
register_attention_backend("sdpa")(_sdpa)


def _make_pinned_sdpa(sdp_backend: SDPBackend) -> AttentionImpl:
    """An SDPA variant pinned to one dispatcher backend — errors instead of
    silently falling back, which is exactly what you want in a benchmark."""

    def pinned(
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        attn_mask: Tensor | None,
        dropout_p: float,
        is_causal: bool,
        scale: float,
    ) -> Tensor:
        with sdpa_kernel([sdp_backend]):
            return _sdpa(
                q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale
            )

    return pinned


register_attention_backend("sdpa_math")(_make_pinned_sdpa(SDPBackend.MATH))
register_attention_backend("sdpa_flash")(_make_pinned_sdpa(SDPBackend.FLASH_ATTENTION))
register_attention_backend("sdpa_mem_efficient")(_make_pinned_sdpa(SDPBackend.EFFICIENT_ATTENTION))


@register_attention_backend("flash_attention_2")
def flash_attention_2(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float,
) -> Tensor:
    """Tri Dao's FlashAttention-2 (``flash-attn`` package). GQA handled natively."""
    if attn_mask is not None:
        raise ValueError(
            "flash_attention_2 does not take dense masks; use causal attention "
            "with packed sequences, or the sdpa backend for padding masks"
        )
    try:
        from flash_attn import flash_attn_func
    except ImportError as e:
        raise ImportError(
            "backend 'flash_attention_2' needs the flash-attn package: "
            "pip install 'baby-llm[flash]'"
        ) from e
    # flash-attn expects (batch, seq, heads, head_dim)
    out = flash_attn_func(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        dropout_p=dropout_p,
        softmax_scale=scale,
        causal=is_causal,
    )
    return out.transpose(1, 2)


@register_attention_backend("flash_attention_3")
def flash_attention_3(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    attn_mask: Tensor | None,
    dropout_p: float,
    is_causal: bool,
    scale: float,
) -> Tensor:
    """FlashAttention-3 (Hopper). No dropout, no dense masks."""
    if attn_mask is not None:
        raise ValueError("flash_attention_3 does not take dense masks")
    if dropout_p > 0.0:
        raise ValueError("flash_attention_3 does not implement attention dropout")
    try:
        from flash_attn_interface import flash_attn_func
    except ImportError as e:
        raise ImportError(
            "backend 'flash_attention_3' needs the FA3 build of flash-attn "
            "(flash_attn_interface); see the flash-attention repo's hopper/ README"
        ) from e
    out = flash_attn_func(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        softmax_scale=scale,
        causal=is_causal,
    )
    if isinstance(out, tuple):  # some FA3 builds also return the softmax LSE
        out = out[0]
    return out.transpose(1, 2)


# ──────────────────────────────────────────────────────────────────────────────
# The module
# ──────────────────────────────────────────────────────────────────────────────


class Attention(nn.Module):
    """Multi-head / grouped-query self-attention with a swappable kernel.

    Layout convention: input ``(batch, seq, hidden)``, internal ``(batch, heads,
    seq, head_dim)``, output ``(batch, seq, hidden)``.

    Args:
        hidden_size: Residual stream width.
        num_heads: Query heads.
        num_kv_heads: Key/value heads for GQA; ``None`` means ``num_heads`` (MHA).
        bias: Bias on the q/k/v/o projections.
        dropout: Attention-probability dropout, applied only when ``self.training``.
        is_causal: Apply a causal mask when no explicit ``attn_mask`` is given.
        backend: Registry name of the execution path. Validated eagerly.
        softmax_scale: Score scaling; ``None`` means ``1/sqrt(head_dim)``.
    """

    def __init__(
        self,
        hidden_size: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        *,
        bias: bool = False,
        dropout: float = 0.0,
        is_causal: bool = True,
        backend: str = "sdpa",
        softmax_scale: float | None = None,
    ) -> None:
        super().__init__()
        num_kv_heads = num_kv_heads if num_kv_heads is not None else num_heads
        if hidden_size % num_heads != 0:
            raise ValueError(f"hidden_size {hidden_size} not divisible by num_heads {num_heads}")
        if num_heads % num_kv_heads != 0:
            raise ValueError(f"num_heads {num_heads} not divisible by num_kv_heads {num_kv_heads}")

        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = hidden_size // num_heads
        self.dropout = dropout
        self.is_causal = is_causal
        self.softmax_scale = (
            softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(self.head_dim)
        )

        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden_size, num_kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=bias)

        self.set_backend(backend)

    @property
    def backend(self) -> str:
        return self._backend

    def set_backend(self, name: str) -> None:
        """Switch execution path. Validates against the registry immediately so a
        typo fails here, not mid-training."""
        if name not in ATTENTION_BACKENDS:
            raise KeyError(
                f"unknown attention backend {name!r}; available: {available_attention_backends()}"
            )
        self._backend = name

    def forward(
        self,
        x: Tensor,
        *,
        rope: tuple[Tensor, Tensor] | None = None,
        attn_mask: Tensor | None = None,
    ) -> Tensor:
        """Args:
        x: ``(batch, seq, hidden)`` input.
        rope: Optional ``(cos, sin)`` of shape ``(seq, head_dim)`` to rotate q/k.
        attn_mask: Optional mask in SDPA convention — bool (True = attend) or
            additive float, broadcastable to ``(batch, heads, seq, seq)``. When
            given, it must already encode causality: mixing ``is_causal=True``
            with an explicit mask is ambiguous and rejected.
        """
        if attn_mask is not None and self.is_causal:
            raise ValueError(
                "got attn_mask on a causal Attention module; fold the causal "
                "structure into the mask itself (see torch SDPA semantics) or "
                "construct the module with is_causal=False"
            )

        batch, seq, _ = x.shape
        q = self.q_proj(x).view(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(batch, seq, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(batch, seq, self.num_kv_heads, self.head_dim).transpose(1, 2)

        if rope is not None:
            q, k = apply_rotary_emb(q, k, *rope)

        impl = resolve_attention_backend(self._backend)
        out = impl(
            q,
            k,
            v,
            attn_mask=attn_mask,
            dropout_p=self.dropout if self.training else 0.0,
            is_causal=self.is_causal,
            scale=self.softmax_scale,
        )

        out = out.transpose(1, 2).reshape(batch, seq, self.num_heads * self.head_dim)
        return self.o_proj(out)

    def extra_repr(self) -> str:
        return (
            f"heads={self.num_heads}, kv_heads={self.num_kv_heads}, "
            f"head_dim={self.head_dim}, backend={self._backend!r}, causal={self.is_causal}"
        )
