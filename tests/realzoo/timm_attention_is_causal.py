"""timm (pytorch-image-models) Attention: ViT-style fused qkv reshape(B, N, 3, H, dh).permute(2, 0, 3, 1, 4), made causal by its own is_causal flag or by a boolean keep-mask passed to SDPA.

Source: https://github.com/huggingface/pytorch-image-models/blob/61a26c7707045e12ba780cfbcb61653d49e5e37f/timm/layers/attention.py (lines 15-38: maybe_add_mask and resolve_self_attn_mask; lines 41-137: class Attention); commit "Improve attention mask handling for vision_transformer and eva and related blocks" on refs/heads/main. Text read from the index copy at commit 02bb6b3 (a pull-request merge commit); its timm/layers/attention.py is the same git blob (e4be806) as at 61a26c7.
Licence: Apache-2.0 ("Copyright 2019 Ross Wightman", LICENSE at the repository root)
Copied: verbatim (functions maybe_add_mask and resolve_self_attn_mask with their decorators, class Attention); `from typing import Final, Optional, Type`, `import torch`, `from torch import nn as nn`, `from torch.nn import functional as F` as in the original. Shims ABOVE the copied block replace the package-relative imports `from ._fx import register_notrace_function` (identity decorator here; in timm it only registers the function as an FX leaf) and `from .config import use_fused_attn` (returns the module flag FUSED, default True like timm's default TIMM_FUSED_ATTN=1 on torch >= 2.0; set FUSED = False before constructing to get the manual path).
Truth: correct causal MHA when called with is_causal=True, or with attn_mask = boolean tril keep-mask (True = attend): qkv Linear(dim, 3*H*dh, bias=qkv_bias) with [Q; K; V] row blocks (reshape(B, N, 3, H, dh).permute(2, 0, 3, 1, 4)), fused path F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p gated on self.training, is_causal), manual path q*scale, q @ k^T, additive -inf bias from resolve_self_attn_mask (triu(1) for is_causal, ~mask filled with -inf for a bool mask), softmax(-1); merge transpose(1, 2).reshape(B, N, H*dh); proj Linear(H*dh, dim_out, bias=proj_bias=True). Called as m(x) it is NOT causal (is_causal defaults to False, it is a ViT encoder layer).
"""
from typing import Final, Optional, Type

import torch
from torch import nn as nn
from torch.nn import functional as F

# --- shims for the package-relative imports (see docstring) ---
FUSED = True


def register_notrace_function(func):
    return func


def use_fused_attn(experimental: bool = False) -> bool:
    return FUSED
# --- end of shims; copied block follows ---

TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("causal-only-with-flag", "no-context-length", "head-dim-argument")
FORWARD = "x, attn_mask=None, is_causal=False"
NOTES = ("Constructor Attention(dim, num_heads=8, attn_head_dim=None, dim_out=None, qkv_bias=False, qk_norm=False, scale_norm=False, "
         "proj_bias=True, attn_drop=0., proj_drop=0., norm_layer=None, device=None, dtype=None). dim = d_in; head width = attn_head_dim "
         "or dim // num_heads (divisibility asserted only when attn_head_dim is None); attention width H*dh; proj maps H*dh -> dim_out "
         "(default dim_out = dim, so the OUTPUT width is d_in unless dim_out is given: the lesson's layer is "
         "Attention(d_in, H, attn_head_dim=d_out // H, dim_out=d_out, qkv_bias=...)). Causal ONLY with forward(x, is_causal=True) or "
         "forward(x, attn_mask=torch.ones(n, n, dtype=torch.bool).tril()) (bool, True = keep; a float mask is additive). No mask buffer, "
         "no context length. Fused qkv.weight (3*H*dh, dim) = [W_q; W_k; W_v]. Two code paths chosen at construction by use_fused_attn() "
         "(module flag FUSED in this file).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'maps Q/K/V in the input width (not d_in -> d_out): checked with d_in = d_out'


@torch.fx.wrap
@register_notrace_function
def maybe_add_mask(scores: torch.Tensor, attn_mask: Optional[torch.Tensor] = None):
    return scores if attn_mask is None else scores + attn_mask


def resolve_self_attn_mask(
        seq_len: int,
        attn: torch.Tensor,
        attn_mask: Optional[torch.Tensor] = None,
        is_causal: bool = False,
) -> Optional[torch.Tensor]:
    # Build additive bias matching SDPA semantics for self-attention
    # is_causal and attn_mask are mutually exclusive (is_causal takes precedence)
    if is_causal:
        attn_bias = attn.new_full((seq_len, seq_len), float('-inf')).triu_(1)
    elif attn_mask is None:
        attn_bias = None
    elif attn_mask.dtype == torch.bool:
        attn_bias = torch.zeros_like(attn_mask, dtype=attn.dtype)
        attn_bias.masked_fill_(~attn_mask, float('-inf'))
    else:
        attn_bias = attn_mask
    return attn_bias


class Attention(nn.Module):
    """Standard Multi-head Self Attention module with QKV projection.

    This module implements the standard multi-head attention mechanism used in transformers.
    It supports both the fused attention implementation (scaled_dot_product_attention) for
    efficiency when available, and a manual implementation otherwise. The module includes
    options for QK normalization, attention dropout, and projection dropout.
    """
    fused_attn: Final[bool]

    def __init__(
            self,
            dim: int,
            num_heads: int = 8,
            attn_head_dim: Optional[int] = None,
            dim_out: Optional[int] = None,
            qkv_bias: bool = False,
            qk_norm: bool = False,
            scale_norm: bool = False,
            proj_bias: bool = True,
            attn_drop: float = 0.,
            proj_drop: float = 0.,
            norm_layer: Optional[Type[nn.Module]] = None,
            device=None,
            dtype=None,
    ) -> None:
        """Initialize the Attention module.

        Args:
            dim: Input dimension of the token embeddings.
            num_heads: Number of attention heads.
            attn_head_dim: Dimension of each attention head. If None, computed as dim // num_heads.
            dim_out: Output dimension. If None, same as dim.
            qkv_bias: Whether to use bias in the query, key, value projections.
            qk_norm: Whether to apply normalization to query and key vectors.
            scale_norm: Whether to apply normalization to attention output before projection.
            proj_bias: Whether to use bias in the output projection.
            attn_drop: Dropout rate applied to the attention weights.
            proj_drop: Dropout rate applied after the output projection.
            norm_layer: Normalization layer constructor for QK normalization if enabled.
        """
        super().__init__()
        dd = {'device': device, 'dtype': dtype}
        dim_out = dim_out or dim
        head_dim = attn_head_dim
        if head_dim is None:
            assert dim % num_heads == 0, 'dim should be divisible by num_heads'
            head_dim = dim // num_heads
        if qk_norm or scale_norm:
            assert norm_layer is not None, 'norm_layer must be provided if qk_norm or scale_norm is True'

        self.num_heads = num_heads
        self.head_dim = head_dim
        self.attn_dim = num_heads * head_dim
        self.scale = head_dim ** -0.5
        self.fused_attn = use_fused_attn()

        self.qkv = nn.Linear(dim, self.attn_dim * 3, bias=qkv_bias, **dd)
        self.q_norm = norm_layer(head_dim, **dd) if qk_norm else nn.Identity()
        self.k_norm = norm_layer(head_dim, **dd) if qk_norm else nn.Identity()
        self.attn_drop = nn.Dropout(attn_drop)
        self.norm = norm_layer(self.attn_dim, **dd) if scale_norm else nn.Identity()
        self.proj = nn.Linear(self.attn_dim, dim_out, bias=proj_bias, **dd)
        self.proj_drop = nn.Dropout(proj_drop)

    def forward(
            self,
            x: torch.Tensor,
            attn_mask: Optional[torch.Tensor] = None,
            is_causal: bool = False,
    ) -> torch.Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k = self.q_norm(q), self.k_norm(k)

        if self.fused_attn:
            x = F.scaled_dot_product_attention(
                q, k, v,
                attn_mask=attn_mask,
                dropout_p=self.attn_drop.p if self.training else 0.,
                is_causal=is_causal,
            )
        else:
            q = q * self.scale
            attn = q @ k.transpose(-2, -1)
            attn_bias = resolve_self_attn_mask(N, attn, attn_mask, is_causal)
            attn = maybe_add_mask(attn, attn_bias)
            attn = attn.softmax(dim=-1)
            attn = self.attn_drop(attn)
            x = attn @ v

        x = x.transpose(1, 2).reshape(B, N, self.attn_dim)
        x = self.norm(x)
        x = self.proj(x)
        x = self.proj_drop(x)
        return x
