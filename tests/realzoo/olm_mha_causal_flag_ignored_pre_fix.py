"""OpenLanguageModel 2.0's MultiHeadAttention: an abstract AttentionBase(nn.Module, ABC) that owns q_proj, k_proj,
v_proj and out_proj (a one-line nn.Linear subclass) and splits and merges the heads, and a subclass that fills in
`compute_attention(q, k, v, mask)`; constructor MultiHeadAttention(embed_dims, num_heads, dropout=0.0, causal=False)
whose docstring says "causal (bool, optional): If True, applies a causal mask"; forward(x, mask=None) with a
keep-mask (`mask == 0` filled with -inf).

Source: https://github.com/openlanguagemodel/openlanguagemodel (openlanguagemodel 2.0 on PyPI, the distribution's
Repository), files olm/nn/torch_nn_wrappers.py, olm/nn/attention/base.py and olm/nn/attention/mha.py as released in
openlanguagemodel 2.0.
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info/licenses, "Copyright (c) 2025 OLM
Contributors").
Copied: verbatim from the PyPI wheel openlanguagemodel==2.0 (pip download --no-deps): lines 10-17 of
olm/nn/torch_nn_wrappers.py (Linear), lines 1-2 and 4-5 of olm/nn/attention/base.py (imports) and lines 8-93
(AttentionBase), lines 1-3 of olm/nn/attention/mha.py (imports) and lines 7-51 (MultiHeadAttention).  Left out:
the three package imports (`from olm.nn.torch_nn_wrappers import Linear` and `from olm.nn.attention.base import
...`, the classes being in this file, and `from olm.nn.embeddings.positional import RotaryPositionalEmbedding`, needed
only by the rotary base class).
ADDED: this entry's constants.
Truth: bug. `causal` is stored (self.causal = causal) and never read: MultiHeadAttention(d, h, causal=True)(x) is
exactly mha_forward WITHOUT the causal mask (the future moves the past), though the docstring promises a causal
mask; given a (n, n) keep-mask as `mask` it is the lesson's layer exactly (both in _truth.py). Evidence: the fix
released in openlanguagemodel 2.1, whose compute_attention adds `if self.causal: ... causal_mask = torch.tril(
torch.ones(seq_len, seq_len, ...)); attention_scores = attention_scores.masked_fill(~causal_mask, float('-inf'))`
(mha.py of the 2.1 wheel, lines 43-46), and the independent reference.
"""
import torch
import torch.nn as nn
from abc import ABC, abstractmethod
from typing import Optional
import torch
import torch.nn as nn
from typing import Optional
import torch.nn as nn

class Linear(nn.Linear):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
    
    def forward(self, x):
        return super().forward(x)

TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "causal-flag-ignored"
RULE_GAPS = ("abstract-base-class-owns-projections", "causal-only-with-flag", "keep-mask-argument")
FORWARD = "x, mask=None"
NOTES = ("MultiHeadAttention(embed_dims, num_heads, dropout=0.0, causal=False); forward(x, mask=None) -> (B, n, "
         "embed_dims); `causal` is stored and never read.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("built with causal=True, the flag is stored and never read: given the causal mask mha-check passes it is the "
                    "lesson's layer, called as forward(x) (the mask is optional) the whole future leaks, so "
                    "causal-leakage fails, naming the unread flag; no catalogued mistake is a flag that does nothing")
class AttentionBase(nn.Module, ABC):
    """
    Abstract base class for attention mechanisms.

    Provides the common structure for attention layers, including QKV projections
    and output projection. Subclasses must implement the specific attention logic
    in `compute_attention`.

    Attributes:
        embed_dim (int): Total dimension of the model.
        num_heads (int): Number of parallel attention heads.
        head_dim (int): Dimension of each attention head.
        scale (float): Scaling factor for dot products (1 / sqrt(head_dim)).
        dropout (nn.Dropout): Dropout layer applied to attention weights.
        q_proj (Linear): Linear projection for Query.
        k_proj (Linear): Linear projection for Key.
        v_proj (Linear): Linear projection for Value.
        out_proj (Linear): Linear projection for Output.
    """
    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True):
        """
        Initializes the AttentionBase.

        Args:
            embed_dim (int): Total dimension of the model.
            num_heads (int): Number of parallel attention heads.
            dropout (float, optional): Dropout probability. Defaults to 0.0.
            bias (bool, optional): Whether to use bias in linear projections. Defaults to True.

        Raises:
            AssertionError: If embed_dim is not divisible by num_heads.
        """
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.dropout = nn.Dropout(dropout)

        # Shared QKV projections
        self.q_proj = Linear(embed_dim, embed_dim, bias=bias) # torch.nn.Linear can also be used
        self.k_proj = Linear(embed_dim, embed_dim, bias=bias) # torch.nn.Linear can also be used
        self.v_proj = Linear(embed_dim, embed_dim, bias=bias) # torch.nn.Linear can also be used

        # Shared output projection
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias) # torch.nn.Linear can also be used

    @abstractmethod
    def compute_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """
        Computes the attention scores and output.

        Args:
            q (torch.Tensor): Query tensor [batch, heads, seq, head_dim].
            k (torch.Tensor): Key tensor [batch, heads, seq, head_dim].
            v (torch.Tensor): Value tensor [batch, heads, seq, head_dim].
            mask (torch.Tensor, optional): Attention mask. Defaults to None.

        Returns:
            torch.Tensor: The attention output [batch, heads, seq, head_dim].
        """
        pass

    def forward(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """
        Standard forward pass for attention layers.

        Projects input to Q, K, V, calls `compute_attention`, and projects output.

        Args:
            x (torch.Tensor): Input tensor [batch, seq, embed_dim].
            mask (torch.Tensor, optional): Attention mask. Defaults to None.

        Returns:
            torch.Tensor: Output tensor [batch, seq, embed_dim].
        """
        B, N, D = x.shape
        q = self.q_proj(x).view(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, N, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, N, self.num_heads, self.head_dim).transpose(1, 2)

        out = self.compute_attention(q, k, v, mask)
        out = out.transpose(1, 2).contiguous().view(B, N, D)
        return self.out_proj(out)

class MultiHeadAttention(AttentionBase):
    """
    Implements Multi-Head Attention (MHA) as described in "Attention Is All You Need".

    Splits the input into multiple heads, computes scaled dot-product attention for each,
    and concatenates the results. Supports causal masking for autoregressive models.

    Args:
        embed_dims (int): Total dimension of the model.
        num_heads (int): Number of parallel attention heads.
        dropout (float, optional): Dropout probability on attention weights. Defaults to 0.0.
        causal (bool, optional): If True, applies a causal mask. Defaults to False.

    Attributes:
        scale (float): Scaling factor (1 / sqrt(head_dim)).
        causal (bool): Whether to apply a causal mask.
    """
    def __init__(self, embed_dims: int, num_heads: int, dropout: float = 0.0, causal: bool = False):
        super().__init__(embed_dims, num_heads, dropout)
        self.causal = causal

    def compute_attention(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """
        Computes the scaled dot-product attention.

        Args:
            q (torch.Tensor): Query tensor of shape [batch, heads, seq, head_dim].
            k (torch.Tensor): Key tensor of shape [batch, heads, seq, head_dim].
            v (torch.Tensor): Value tensor of shape [batch, heads, seq, head_dim].
            mask (torch.Tensor, optional): Attention mask. Defaults to None.

        Returns:
            torch.Tensor: The result of the attention mechanism applied to v.
        """
        # q, k, v: [batch, heads, seq, dim]
        # doing scaled dot product attention here
        attention_scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        if mask is not None:
            attention_scores = attention_scores.masked_fill(mask == 0, float('-inf'))

        attention_probs = torch.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)

        out = torch.matmul(attention_probs, v)
        return out
