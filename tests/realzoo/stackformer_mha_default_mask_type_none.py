"""stackformer's Multi_Head_Attention: fused qkv_proj Linear(C, 3C) split [Q; K; V], heads split with
view(B, T, H, D).transpose(1, 2), F.scaled_dot_product_attention through the package's dispatcher _run_attention
with a boolean mask (True = attend) built from a list of mask NAMES (`mask_type`, e.g. ['causal'], kept in an LRU
cache keyed by length and device), out_proj Linear(C, C) whose bias follows qkv_bias; `device` and `dtype`
constructor arguments. Its docstring says "mask_type ([str], optional, default=['causal'])" and forward(x,
mask=True) "Apply causal mask", and the module's quick start builds Multi_Head_Attention(embed_dim=256,
num_heads=8) and calls attn(x, mask=True) - but the constructor's default is mask_type=None, for which
_run_attention makes no mask at all: built as documented, the layer is bidirectional. (The package's own
TransformerLayer passes mask_type=["causal"] from its config, so the package's models are causal.)

Source: https://github.com/stackformer-labs/Stackformer (the PyPI project's repository), files
stackformer/modules/Attention.py, stackformer/modules/attention_engine.py and stackformer/modules/masks.py as released
in stackformer 0.1.10 on PyPI.
Licence: MIT (Copyright (c) 2025 Stackformer Labs), LICENSE in the wheel's dist-info.
Copied: verbatim from the PyPI wheel stackformer==0.1.10 (pip download --no-deps): masks.py's imports and type
aliases (lines 6-26), its dense mask builders, MASK_REGISTRY and make_mask (lines 28-197) and its cache helpers
through _get_attention_mask (lines 394-460); attention_engine.py's imports of torch and flex_attention and its
functions _run_sdpa, _run_flex_attention and _run_attention (lines 12-17 and 27-169); Attention.py's imports
(Literal, OrderedDict, torch, nn, F) and the class Multi_Head_Attention (lines 221-330). Left out: the FlexAttention
mask mods, make_block_mask and _get_block_mask of masks.py (only the "flex" backend and the unused method
_get_or_create_mask reach them), the package-internal imports between the three files, and every other class.
ADDED: this entry's constants after the imports.
Truth: bug, two. (1) Built with its defaults (mask_type=None) and called as documented, attn(x, mask=True), it is
the lesson's layer WITHOUT the causal mask (bias-free qkv and out projections): equal to the bidirectional computation
exactly, and the future moves the past; built with mask_type=["causal"] it is the lesson's layer exactly (no
biases). (2) forward hands dropout_p=self.dropout_p to SDPA whatever self.training is: with dropout > 0 the
attention weights are dropped in eval() too (the default dropout is 0.0, so it shows only when a dropout is given).
"""
from __future__ import annotations

from collections import OrderedDict
import inspect
from typing import Any, Callable, Dict, List, Literal, Optional, Tuple, Union

import torch
try:
    from torch.nn.attention.flex_attention import (
        BlockMask,
        and_masks,
        create_block_mask,
        noop_mask,
        or_masks,
    )
except ImportError:
    BlockMask = and_masks = create_block_mask = noop_mask = or_masks = None

MaskSpec = Union[List[str], Tuple[str, ...], str, None]
MaskMod = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
_DEFAULT_MAX_CACHE_SIZE = 32

import torch.nn.functional as F
try:
    from torch.nn.attention.flex_attention import flex_attention
except ImportError:
    flex_attention = None

from typing import Literal

import torch
import torch.nn as nn
import torch.nn.functional as F
from collections import OrderedDict

TARGET = "Multi_Head_Attention"
TRUTH = "bug"
BUG = "not causal by default (mask_type=None despite the documented ['causal']); dropout in eval"
RULE_GAPS = ("mask-by-name-registry", "mask-cached-lru", "fused-qkv", "sdpa-bool-keep-mask", "out-proj-bias-follows-qkv-bias",
             "device-dtype-arguments")
FORWARD = "x, mask=True"
NOTES = ("Multi_Head_Attention(embed_dim, num_heads, dropout=0.0, mask_type=None, qkv_bias=False, device='cpu', "
         "dtype=torch.float32, backend='sdpa', combine='or', **mask_kwargs). forward(x, mask=True) -> (B, T, C).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'no-mask'
EXPECTED_BECAUSE = ("built with its defaults (mask_type=None) the layer makes no mask: the lesson's layer without its "
                    "causal mask; eval-determinism fails too (SDPA's dropout_p is not gated by self.training)")

# ============================================================================
# Dense Mask Builders (SDPA)
# ============================================================================


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Standard autoregressive causal attention mask (dense boolean matrix)."""
    return torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool, device=device))


def sliding_window(
    seq_len: int, window_size: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """Sliding window causal attention mask."""
    if window_size <= 0:
        raise ValueError("window_size must be > 0")

    i = torch.arange(seq_len, device=device).unsqueeze(1)  # (T, 1)
    j = torch.arange(seq_len, device=device).unsqueeze(0)  # (1, T)

    in_past = j <= i
    in_window = (i - j) < window_size

    return in_past & in_window


def dilated_causal(
    seq_len: int, dilation: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """Dilated causal attention mask."""
    if dilation <= 0:
        raise ValueError("dilation must be > 0")

    i = torch.arange(seq_len, device=device).unsqueeze(1)
    j = torch.arange(seq_len, device=device).unsqueeze(0)

    in_past = j <= i
    on_stride = (i - j) % dilation == 0
    return in_past & on_stride


def random_mask(
    seq_len: int,
    num_random: int,
    device: torch.device | str | None = None,
    generator: Optional[torch.Generator] = None,
) -> torch.Tensor:
    """Random sparse causal attention mask."""
    if num_random < 0 or num_random > seq_len:
        raise ValueError("num_random must be between 0 and seq_len")
    cols = (
        torch.rand(seq_len, seq_len, device=device, generator=generator)
        .tril()
        .topk(num_random, dim=1)
        .indices
    )

    mask = torch.zeros(seq_len, seq_len, dtype=torch.bool, device=device)
    mask.scatter_(1, cols, True)
    return mask


def global_mask(
    seq_len: int, global_index: List[int], device: torch.device | str | None = None
) -> torch.Tensor:
    """Global attention mask."""
    if len(global_index) == 0:
        raise ValueError("global_index must contain at least one index")
    if any(i < 0 or i >= seq_len for i in global_index):
        raise ValueError("global_index contains invalid token indices")

    mask = torch.zeros(seq_len, seq_len, dtype=torch.bool, device=device)
    g = torch.tensor(global_index, device=device)

    mask[g, :] = True
    mask[:, g] = True

    return mask


def document_mask(
    seq_len: int,
    document_ids: torch.Tensor,
    device: torch.device | str | None = None,
) -> torch.Tensor:
    """Document (packed-sequence) attention mask."""
    if document_ids.dim() != 1 or document_ids.shape[0] != seq_len:
        raise ValueError(
            f"document_ids must be a 1D tensor of length seq_len={seq_len}, "
            f"got shape {tuple(document_ids.shape)}"
        )

    document_ids = document_ids.to(device=device)
    return document_ids.unsqueeze(1) == document_ids.unsqueeze(0)


def no_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Full unmasked bidirectional attention mask."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device)


def mistral(
    seq_len: int, window_size: int, dilation: int, device: torch.device | str | None = None
) -> torch.Tensor:
    """Mistral-style hybrid sliding window + dilated attention mask."""
    return sliding_window(seq_len, window_size, device=device) | dilated_causal(
        seq_len, dilation, device=device
    )


MASK_REGISTRY: Dict[str, Callable] = {
    "no": no_mask,
    "causal": causal_mask,
    "sliding_window": sliding_window,
    "dilated_causal": dilated_causal,
    "random_mask": random_mask,
    "global_mask": global_mask,
    "document_mask": document_mask,
    "mistral": mistral,
}


def make_mask(
    mask_types: list[str] | tuple[str, ...] | str | None,
    seq_len: int,
    device: torch.device | str | None = None,
    combine: Literal["or", "and"] = "or",
    **kwargs,
) -> torch.Tensor:
    """Construct a composite boolean attention mask from specified mask strategy names."""
    if mask_types is None:
        return no_mask(seq_len, device=device)

    if isinstance(mask_types, str):
        mask_types = [mask_types]

    if not isinstance(mask_types, (list, tuple)):
        raise TypeError("mask_types must be a list, tuple, or string of mask name(s)")

    if combine not in ("or", "and"):
        raise ValueError(f"combine must be 'or' or 'and', got {combine!r}")

    init_val = combine == "and"
    mask = torch.full(
        (seq_len, seq_len),
        fill_value=init_val,
        dtype=torch.bool,
        device=device,
    )

    for name in mask_types:
        name = name.lower()
        if name not in MASK_REGISTRY:
            raise ValueError(
                f"Unknown mask '{name}'. Available: {list(MASK_REGISTRY.keys())}"
            )

        fn = MASK_REGISTRY[name]
        sig = inspect.signature(fn)
        call_kwargs = {k: v for k, v in kwargs.items() if k in sig.parameters}

        partial = fn(seq_len, device=device, **call_kwargs)

        if combine == "or":
            mask |= partial
        else:
            mask &= partial

    return mask


# ============================================================================
# Mask Cache Memoization
# ============================================================================


def _normalize_mask_names(mask_type: MaskSpec) -> Tuple[str, ...]:
    """Normalize a mask spec into a sorted tuple of lowercase names."""
    if mask_type is None:
        return ("no",)
    if isinstance(mask_type, str):
        return (mask_type.lower(),)
    return tuple(sorted(name.lower() for name in mask_type))


def _make_cache_key(
    mask_type: MaskSpec,
    seq_len: int,
    device: torch.device | str | None,
    combine: str,
    mask_kwargs: Dict[str, Any],
) -> Optional[Tuple]:
    """Build a hashable cache key, or return None if the request can't be cached."""
    names = _normalize_mask_names(mask_type)

    hashable_kwargs = []
    for key in sorted(mask_kwargs):
        value = mask_kwargs[key]
        if isinstance(value, (torch.Tensor, torch.Generator)):
            return None
        if isinstance(value, list):
            value = tuple(value)
        hashable_kwargs.append((key, value))

    return (names, seq_len, str(device), combine, tuple(hashable_kwargs))


def _cache_put(cache: OrderedDict, key, value, max_size: int) -> None:
    cache[key] = value
    cache.move_to_end(key)
    while len(cache) > max_size:
        cache.popitem(last=False)


def _get_attention_mask(
    cache: OrderedDict,
    mask_type: MaskSpec,
    seq_len: int,
    device: torch.device | str | None,
    combine: Literal["or", "and"] = "or",
    max_cache_size: int = _DEFAULT_MAX_CACHE_SIZE,
    **mask_kwargs,
) -> Optional[torch.Tensor]:
    """Get (or build + cache) a dense boolean attention mask for SDPA."""
    if mask_type is None:
        return None

    key = _make_cache_key(mask_type, seq_len, device, combine, mask_kwargs)
    if key is not None and key in cache:
        cache.move_to_end(key)
        return cache[key]

    mask = make_mask(mask_type, seq_len=seq_len, device=device, combine=combine, **mask_kwargs)

    if key is not None:
        _cache_put(cache, key, mask, max_cache_size)

    return mask

Backend = Literal["sdpa", "flex"]


def _run_sdpa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """Wrapper around PyTorch's scaled dot-product attention (SDPA).

    Args:
        q (torch.Tensor): Query tensor of shape `(B, H, T, D)`.
        k (torch.Tensor): Key tensor of shape `(B, H, S, D)`.
        v (torch.Tensor): Value tensor of shape `(B, H, S, D)`.
        attn_mask (torch.Tensor | None): Attention mask tensor or None.
        dropout_p (float, default=0.0): Attention dropout probability.
        is_causal (bool, default=False): Causal flag for SDPA.
        scale (float | None, default=None): Custom scale factor for QK^T.
        enable_gqa (bool, default=False): Enable GQA broadcasting in SDPA.

    Returns:
        torch.Tensor: Output tensor of shape `(B, H, T, D)`.
    """
    kwargs: Dict[str, Any] = {
        "attn_mask": attn_mask,
        "dropout_p": dropout_p,
        "is_causal": is_causal,
    }
    if scale is not None:
        kwargs["scale"] = scale
    if enable_gqa:
        kwargs["enable_gqa"] = enable_gqa

    return F.scaled_dot_product_attention(q, k, v, **kwargs)


def _run_flex_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    score_mod: Optional[Callable] = None,
    block_mask: Any = None,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
    return_lse: bool = False,
    kernel_options: Optional[Dict[str, Any]] = None,
) -> torch.Tensor:
    """Wrapper around PyTorch FlexAttention backend."""
    if flex_attention is None:
        raise RuntimeError("PyTorch FlexAttention is not available in this environment.")
    return flex_attention(
        query=query,
        key=key,
        value=value,
        score_mod=score_mod,
        block_mask=block_mask,
        scale=scale,
        enable_gqa=enable_gqa,
        return_lse=return_lse,
        kernel_options=kernel_options,
    )


def _run_attention(
    backend: Backend = "sdpa",
    q: torch.Tensor = None,
    k: torch.Tensor = None,
    v: torch.Tensor = None,
    mask_type: MaskSpec = None,
    seq_len: Optional[int] = None,
    device: torch.device | str | None = None,
    cache: Optional[OrderedDict] = None,
    dropout_p: float = 0.0,
    combine: Literal["or", "and"] = "or",
    score_mod: Optional[Callable] = None,
    scale: Optional[float] = None,
    enable_gqa: bool = False,
    mask_kwargs: Optional[Dict[str, Any]] = None,
    attn_mask: Any = None,
) -> torch.Tensor:
    """Dispatch attention computation to SDPA or FlexAttention backend based on `backend`.

    Args:
        backend (Backend, default="sdpa"): Attention backend ("sdpa" or "flex").
        q (torch.Tensor): Query tensor of shape `(B, H, T, D)`.
        k (torch.Tensor): Key tensor of shape `(B, H_kv, S, D)`.
        v (torch.Tensor): Value tensor of shape `(B, H_kv, S, D)`.
        mask_type (MaskSpec, optional): Mask specification ('causal', 'sliding_window', etc.).
        seq_len (int, optional): Sequence length. Defaults to `q.size(-2)`.
        device (torch.device | str, optional): Device for mask creation. Defaults to `q.device`.
        cache (OrderedDict, optional): LRU cache for mask storage.
        dropout_p (float, default=0.0): Attention dropout probability (sdpa only).
        combine (Literal["or", "and"], default="or"): How multiple masks combine.
        score_mod (Callable, optional): Score modifier callback for FlexAttention.
        scale (float, optional): Custom scale factor for QK^T.
        enable_gqa (bool, default=False): Enable GQA broadcasting in attention kernels.
        mask_kwargs (Dict[str, Any], optional): Additional kwargs for mask builder.
        attn_mask (Any, optional): Explicit pre-computed attention mask (dense tensor or BlockMask).

    Returns:
        torch.Tensor: Output tensor of shape `(B, H, T, D)`.
    """
    if backend not in ("sdpa", "flex"):
        raise ValueError(f"Unknown backend '{backend}'. Expected 'sdpa' or 'flex'.")

    mask_kwargs = mask_kwargs or {}
    if seq_len is None and q is not None:
        seq_len = q.size(-2)
    if device is None and q is not None:
        device = q.device

    if backend == "sdpa":
        if attn_mask is None and mask_type is not None:
            if cache is None:
                attn_mask = make_mask(mask_type, seq_len=seq_len, device=device, combine=combine, **mask_kwargs)
            else:
                attn_mask = _get_attention_mask(
                    cache, mask_type, seq_len, device, combine=combine, **mask_kwargs
                )
        return _run_sdpa(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale, enable_gqa=enable_gqa
        )

    if backend == "flex":
        block_mask = attn_mask
        if block_mask is None and mask_type is not None:
            if cache is None:
                block_mask = make_block_mask(
                    mask_type, B=1, H=1, Q_LEN=seq_len, KV_LEN=seq_len, device=device, combine=combine, **mask_kwargs
                )
            else:
                block_mask = _get_block_mask(
                    cache, mask_type, seq_len, device, combine=combine, **mask_kwargs
                )
        return _run_flex_attention(
            q, k, v, score_mod=score_mod, block_mask=block_mask, scale=scale, enable_gqa=enable_gqa
        )


class Multi_Head_Attention(nn.Module):
    """Standard multi-head self-attention (MHA).

    Why/when to use:
    - Baseline attention for encoder and decoder blocks.
    - Multiple heads learn different relation subspaces.

    Constructor args:
        embed_dim (int, required): Model width ``C``.
        num_heads (int, required): Number of query heads ``H``.
            Rule: ``embed_dim % num_heads == 0`` (enforced).
        dropout (float, optional, default=0.0): Dropout on attention probs.
        qkv_bias (bool, optional, default=False): Bias in Q/K/V projections.
        device (str or torch.device, optional, default='cpu').
        dtype (torch.dtype, optional, default=torch.float32).
        mask_type ([str], optional, default=['causal']): 'causal' or 'sliding_window'.
        
    Forward args:
        x (torch.Tensor): ``(B, T, C)``.
        mask (bool, optional, default=True): Apply causal mask.

    Returns:
        torch.Tensor: ``(B, T, C)``.

    Complexity:
        Time/memory are O(B * H * T^2 * D), dominated by attention matrix.

    Example:
        >>> layer = Multi_Head_Attention(embed_dim=512, num_heads=8)
        >>> y = layer(torch.randn(2, 128, 512), mask=True)
    """
    def __init__(self, embed_dim, num_heads, dropout=0.0, mask_type=None,
                 qkv_bias=False, device='cpu', dtype=torch.float32,
                 backend: Literal["sdpa", "flex"] = "sdpa", combine: Literal["or", "and"] = "or",
                 **mask_kwargs):
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        if backend not in ("sdpa", "flex"):
            raise ValueError(f"backend must be 'sdpa' or 'flex', got {backend!r}")

        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads  # Each head gets a slice of the embedding
        
        self.mask_type = mask_type
        self.backend = backend
        self.combine = combine
        self.device = device
        self.dtype = dtype
        self.mask_kwargs = mask_kwargs

        # Linear layer
        self.qkv_proj = nn.Linear(embed_dim, embed_dim*3, bias=qkv_bias, device=device, dtype=self.dtype)
        
        # Final output projection after attention
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=qkv_bias, device=device, dtype=self.dtype)

        # Dropout applied to the attention weights
        self.dropout_p = dropout
        
        # Cache for causal masks keyed by sequence length
        self._causal_mask_cache = OrderedDict()

    def _get_or_create_mask(self, seq_len: int, device):
        if self.backend == "sdpa":
            return _get_attention_mask(
                self._causal_mask_cache,
                self.mask_type,
                seq_len,
                device,
                combine=self.combine,
                **self.mask_kwargs,
            )
        return _get_block_mask(
            self._causal_mask_cache,
            self.mask_type,
            seq_len,
            device,
            combine=self.combine,
            **self.mask_kwargs,
        )

    def forward(self, x, mask=True):
        B, T, C = x.shape
        
        qkv = self.qkv_proj(x)                      # (B, T, 3*C)
        q, k, v = qkv.split(self.embed_dim, dim=-1)    # each (B, T, C)
        
        # Reshape for multi-head attention:
        # (B, T, C) → (B, T, num_heads, head_dim) → (B, num_heads, T, head_dim)
        q = q.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        
        out = _run_attention(
            backend=self.backend,
            q=q, k=k, v=v,
            mask_type=self.mask_type if mask else None,
            seq_len=T,
            device=x.device,
            cache=self._causal_mask_cache,
            dropout_p=self.dropout_p,
            combine=self.combine,
            mask_kwargs=self.mask_kwargs,
        )
        
        out = out.transpose(1, 2).contiguous().view(B, T, C)
        
        # Final linear projection
        return self.out_proj(out)  # (B, T, C)
