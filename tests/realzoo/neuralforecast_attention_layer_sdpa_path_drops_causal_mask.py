"""neuralforecast's AttentionLayer around FullAttention(mask_flag=True): the THUML (Informer/Autoformer) wrapper -
query_projection / key_projection / value_projection viewed (B, L, H, -1), an INJECTED inner attention module,
out_projection; forward(queries, keys, values, attn_mask, tau=None, delta=None) -> (out, attn). FullAttention has two
paths: with output_attention=True an einsum path that, for mask_flag=True, builds a TriangularCausalMask when
attn_mask is None and fills it with -inf; with output_attention=False (its default, and what the VanillaTransformer
and iTransformer decoders build) F.scaled_dot_product_attention with
`attn_mask=(attn_mask.mask[:, 0] if (self.mask_flag and attn_mask) else None)`.

Source: https://github.com/Nixtla/neuralforecast (neuralforecast 3.3.0 on PyPI, the distribution's Homepage), file
neuralforecast/common/_modules.py as released in neuralforecast 3.3.0.
Licence: Apache-2.0 (the wheel's METADATA "License: Apache-2.0" and the LICENSE in its dist-info/licenses,
"Copyright 2024 Nixtla").
Copied: verbatim from the PyPI wheel neuralforecast==3.3.0 (pip download --no-deps): lines 10-16 of
neuralforecast/common/_modules.py (imports) and lines 540-730 (AttentionLayer, TriangularCausalMask, FullAttention).
ADDED: this entry's constants and the factory `vanilla_decoder_self_attention(hidden_size, n_head, dropout=0.1)`,
the decoder self-attention exactly as neuralforecast/models/vanillatransformer.py lines 238-246 build it
(AttentionLayer(FullAttention(mask_flag=True, attention_dropout=dropout, output_attention=False), hidden_size,
n_head)).
Truth: bug. Called as its own decoder calls it (TransDecoderLayer: self_attention(x, x, x, attn_mask=x_mask) with
x_mask=None, VanillaTransformer.forward line 286), the SDPA path gets attn_mask=None and no is_causal: exactly
mha_forward WITHOUT the causal mask (the future moves the past), although mask_flag=True documents "applies causal
masking to prevent attention to future positions" and the einsum path of the same class (output_attention=True) IS
the causal layer (both proven in _truth.py). Given a TriangularCausalMask (True = masked) the SDPA path hands it over
as a bool mask, where True means "attend": the mask is inverted, each token attends only to LATER tokens and the
last to none (and the (B, L, L) mask raises unless B is 1 or the number of heads). A mask given as a tensor
raises ("Boolean value of Tensor with more than one value is ambiguous"). Evidence: the independent reference, and
the class's own einsum path; no upstream report was found.
"""

import math
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "vanilla_decoder_self_attention"
TRUTH = "bug"
BUG = "sdpa-path-drops-causal-mask"
RULE_GAPS = ("injected-inner-attention", "required-attn-mask-object", "tuple-output", "heads-view-b-l-h-d")
FORWARD = "queries, keys, values, attn_mask, tau=None, delta=None"
NOTES = ("AttentionLayer(attention, hidden_size, n_heads, d_keys=None, d_values=None); the inner FullAttention decides "
         "the masking; returns (out, attn) with attn None on the SDPA path.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'no-mask'
EXPECTED_BECAUSE = ("called as its decoder calls it (attn_mask=None), the flash path of FullAttention(mask_flag=True) "
                    "applies no mask at all: exactly the lesson's layer without its causal mask (a tensor mask "
                    "raises, only None runs), so causal-leakage fails and no-mask is the mistake")


class AttentionLayer(nn.Module):  
    """Multi-head attention layer wrapper.  

    This layer wraps an attention mechanism and handles the linear projections  
    for queries, keys, and values in multi-head attention. It projects inputs  
    to multiple heads, applies the inner attention mechanism, and projects back  
    to the original hidden dimension.  

    Args:  
        attention (nn.Module): Inner attention mechanism (e.g., FullAttention,   
            ProbAttention) that computes attention scores and outputs.  
        hidden_size (int): Dimension of the model's hidden states.  
        n_heads (int): Number of attention heads.  
        d_keys (int, optional): Dimension of keys per head. If `None` defaults to   
            hidden_size // n_heads.  
        d_values (int, optional): Dimension of values per head. If `None` defaults to
            hidden_size // n_heads.

    Returns:
        (torch.Tensor): Output tensor of shape [batch, seq_len, hidden_size] after
          applying multi-head attention.
        (torch.Tensor) or None: Attention weights of shape [batch, n_heads, seq_len, seq_len]
          if output_attention is True in the inner attention mechanism, otherwise None.

    Notes:
        - The forward method accepts queries, keys, values, and optional masks.
        - Additional parameters tau and delta are passed through to the inner
          attention mechanism for specialized attention variants.
    """

    def __init__(self, attention, hidden_size, n_heads, d_keys=None, d_values=None):
        super(AttentionLayer, self).__init__()

        d_keys = d_keys or (hidden_size // n_heads)
        d_values = d_values or (hidden_size // n_heads)

        self.inner_attention = attention
        self.query_projection = nn.Linear(hidden_size, d_keys * n_heads)
        self.key_projection = nn.Linear(hidden_size, d_keys * n_heads)
        self.value_projection = nn.Linear(hidden_size, d_values * n_heads)
        self.out_projection = nn.Linear(d_values * n_heads, hidden_size)
        self.n_heads = n_heads

    def forward(self, queries, keys, values, attn_mask, tau=None, delta=None):
        B, L, _ = queries.shape
        _, S, _ = keys.shape
        H = self.n_heads

        queries = self.query_projection(queries).view(B, L, H, -1)
        keys = self.key_projection(keys).view(B, S, H, -1)
        values = self.value_projection(values).view(B, S, H, -1)

        out, attn = self.inner_attention(
            queries=queries,
            keys=keys,
            values=values,
            attn_mask=attn_mask,
            tau=tau,
            delta=delta,
        )
        out = out.view(B, L, -1)

        return self.out_projection(out), attn


class TriangularCausalMask:  
    """Triangular causal mask for autoregressive attention.  

    Creates an upper triangular boolean mask that prevents attention mechanisms  
    from attending to future positions in the sequence. This ensures causality  
    in autoregressive models where predictions at time t should only depend on  
    positions before t.  

    The mask is created using torch.triu with diagonal=1, resulting in a mask  
    where positions (i, j) are True when j > i, effectively masking out future  
    positions during attention computation.  

    Args:  
        B (int): Batch size.  
        L (int): Sequence length.  
        device (str, optional): Device to place the mask tensor on.   

    Attributes:  
        _mask (torch.Tensor): Boolean mask tensor of shape [B, 1, L, L] where  
            True values indicate positions to mask (future positions).  

    Notes:  
        - The mask shape [B, 1, L, L] is designed for multi-head attention where  
          the second dimension broadcasts across attention heads.  
        - True values in the mask indicate positions that should be masked out  
          (set to -inf before softmax in attention).  
    """

    def __init__(self, B, L, device="cpu"):
        mask_shape = [B, 1, L, L]
        with torch.no_grad():
            self._mask = torch.triu(
                torch.ones(mask_shape, dtype=torch.bool), diagonal=1
            ).to(device)

    @property
    def mask(self):
        return self._mask


class FullAttention(nn.Module):  
    """Full attention mechanism with scaled dot-product attention.  

    Implements standard multi-head attention using scaled dot-product attention.  
    Supports both efficient computation via PyTorch's scaled_dot_product_attention  
    and explicit attention computation when attention weights are needed. Optional  
    causal masking prevents attention to future positions in autoregressive models.  

    Args:  
        mask_flag (bool, optional): If True, applies causal masking to prevent  
            attention to future positions.
        factor (int, optional): Attention factor parameter (unused in FullAttention,  
            kept for API compatibility with ProbAttention).
        scale (float, optional): Custom scaling factor for attention scores. If None,  
            uses 1/sqrt(d_k) where d_k is the key dimension.  
        attention_dropout (float, optional): Dropout rate applied to attention  
            weights.
        output_attention (bool, optional): If True, returns attention weights along
            with output. If False, uses efficient flash attention.

    Returns:
        (torch.Tensor): Attention output of shape [batch, seq_len, n_heads, head_dim].
        (torch.Tensor or None): Attention weights of shape [batch, n_heads, seq_len, seq_len]
              if output_attention is True, otherwise None.

    Notes:
        - When output_attention=False, uses PyTorch's optimized scaled_dot_product_attention
          for better performance (flash attention).
        - When output_attention=True, computes attention explicitly using einsum operations.
        - If mask_flag=True and no attn_mask is provided, automatically creates a
          TriangularCausalMask for autoregressive attention.
        - The tau and delta parameters are accepted for API compatibility but unused.
    """

    def __init__(
        self,
        mask_flag=True,
        factor=5,
        scale=None,
        attention_dropout=0.1,
        output_attention=False,
    ):
        super(FullAttention, self).__init__()
        self.scale = scale
        self.mask_flag = mask_flag
        self.output_attention = output_attention
        self.dropout = nn.Dropout(attention_dropout)

    def forward(self, queries, keys, values, attn_mask, tau=None, delta=None):
        B, L, H, E = queries.shape
        _, S, _, D = values.shape

        if not self.output_attention:  # flash attention not supported
            q = queries.permute(0, 2, 1, 3)  # [B, H, L, E]
            k = keys.permute(0, 2, 1, 3)
            v = values.permute(0, 2, 1, 3)

            scale = self.scale or 1.0 / math.sqrt(E)
            attn_output = F.scaled_dot_product_attention(
                q,
                k,
                v,
                attn_mask=(
                    attn_mask.mask[:, 0] if (self.mask_flag and attn_mask) else None
                ),
                dropout_p=self.dropout.p if self.training else 0.0,
                scale=scale,
            )
            V = attn_output.permute(0, 2, 1, 3).contiguous()
            return (V, None) if self.output_attention else (V, None)
        else:
            scale = self.scale or 1.0 / math.sqrt(E)
            scores = torch.einsum("blhe,bshe->bhls", queries, keys)

            if self.mask_flag:
                if attn_mask is None:
                    attn_mask = TriangularCausalMask(B, L, device=queries.device)
                scores.masked_fill_(attn_mask.mask, -np.inf)

            A = self.dropout(torch.softmax(scale * scores, dim=-1))
            V = torch.einsum("bhls,bshd->blhd", A, values)

            return (
                (V.contiguous(), A) if self.output_attention else (V.contiguous(), None)
            )


# ---------------------------------------------------------------------------------------------------- ADDED factory
def vanilla_decoder_self_attention(hidden_size, n_head, dropout=0.1):
    """The decoder self-attention of neuralforecast's VanillaTransformer (models/vanillatransformer.py 238-246)."""
    return AttentionLayer(
        FullAttention(
            mask_flag=True,
            attention_dropout=dropout,
            output_attention=False,
        ),
        hidden_size,
        n_head,
    )
