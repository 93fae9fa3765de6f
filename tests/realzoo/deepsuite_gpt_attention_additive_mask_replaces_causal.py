"""deepsuite 1.0.8's GPTAttention: the GPT layer of a "comprehensive deep learning framework" (PyTorch Lightning,
German comments) - GPTAttention(d_model=768, n_heads=12, dropout=0.1, bias=True), a ValueError when the heads do not
divide the width, ONE fused qkv nn.Linear chunked [Q; K; V], a proj nn.Linear, heads by view + transpose, scores /
d_head ** 0.5, and an `attention_mask` argument that is ADDED to the scores INSTEAD OF the causal mask: with no mask
a (n, n) triu bool mask made in forward is filled with -inf; with one, `attn_scores + attention_mask` and no causal
mask at all.  attn_dropout on the weights, resid_dropout on the output.

Source: https://pypi.org/project/deepsuite/ 1.0.8 (author Anton Feldmann; the wheel's METADATA names no repository),
file deepsuite/model/llm/gpt.py as released in deepsuite 1.0.8.
Licence: Apache-2.0 (licenses/LICENSE in the wheel's dist-info: the Apache License 2.0 text, its appendix left
unfilled; no copyright line is given).
Copied: verbatim from the PyPI wheel deepsuite==1.0.8 (pip download --no-deps): lines 10, 14-15 and 25-26 of
deepsuite/model/llm/gpt.py (from __future__ import annotations, import torch, from torch import nn, the TYPE_CHECKING
import of Tensor, its `from typing import TYPE_CHECKING` at line 12 kept too) and lines 29-132 (GPTAttention).  Left
out: the package-internal imports (lines 17-23: the heads, the Lightning base module, the losses), GPTFFN, the block
and the model.
ADDED: this docstring and the constants.
Truth: correct as the lesson's causal layer (forward(x)): out = mha_forward with qkv's three row blocks and proj,
with biases, no leak (in _truth.py, with an independent per-head loop).  Called with a mask, the causal mask is
dropped: the package's GPT model hands its (batch, seq_len) padding mask to every layer, where it is ADDED to the
scores (a 0/1 mask added, not a fill) and nothing is causal any more (in _truth.py: with an all-ones (1, n) mask at
batch 1, position 0 reads the future).  Padding masks are no part of the lesson's contract; mha-check checks the
causal layer.
"""
from __future__ import annotations
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from torch import Tensor

TARGET = "GPTAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("fused-qkv-chunk", "additive-mask-argument-replaces-causal", "german-docstrings", "no-context-length",
             "future-annotations-type-checking-tensor")
FORWARD = "x, attention_mask=None"
NOTES = "GPTAttention(d_model, n_heads, dropout=0.1, bias=True); with attention_mask given, no causal mask is applied"
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("correct causal multi-head attention with biases called as forward(x); the mask argument that "
                    "replaces the causal mask is outside the lesson's contract")



class GPTAttention(nn.Module):
    """Multi-Head Self-Attention für GPT.

    Standard scaled dot-product attention mit causal masking.

    Args:
        d_model: Hidden dimension. Defaults to 768.
        n_heads: Number of attention heads. Defaults to 12.
        dropout: Dropout rate. Defaults to 0.1.
        bias: Whether to use bias in projections. Defaults to True.

    Shape:
        - Input: (batch_size, seq_len, d_model)
        - Output: (batch_size, seq_len, d_model)

    Examples:
        >>> attn = GPTAttention(d_model=768, n_heads=12)
        >>> x = torch.randn(2, 128, 768)
        >>> output = attn(x)
        >>> print(output.shape)
        torch.Size([2, 128, 768])
    """

    def __init__(
        self,
        d_model: int = 768,
        n_heads: int = 12,
        dropout: float = 0.1,
        bias: bool = True,
    ) -> None:
        """Initialize GPT attention."""
        super().__init__()
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_head = d_model // n_heads

        if d_model % n_heads != 0:
            msg = f"d_model ({d_model}) must be divisible by n_heads ({n_heads})"
            raise ValueError(msg)

        # QKV projection
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)

        # Output projection
        self.proj = nn.Linear(d_model, d_model, bias=bias)

        # Dropout
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: Tensor,
        attention_mask: Tensor | None = None,
    ) -> Tensor:
        """Forward pass.

        Args:
            x: Input tensor (batch_size, seq_len, d_model).
            attention_mask: Optional attention mask (batch_size, seq_len, seq_len).

        Returns:
            Output tensor (batch_size, seq_len, d_model).

        Examples:
            >>> attn = GPTAttention(d_model=512, n_heads=8)
            >>> x = torch.randn(2, 64, 512)
            >>> output = attn(x)
        """
        batch_size, seq_len, _ = x.shape

        # QKV projection and split
        qkv = self.qkv(x)
        q, k, v = qkv.chunk(3, dim=-1)

        # Reshape for multi-head attention
        q = q.view(batch_size, seq_len, self.n_heads, self.d_head).transpose(1, 2)
        k = k.view(batch_size, seq_len, self.n_heads, self.d_head).transpose(1, 2)
        v = v.view(batch_size, seq_len, self.n_heads, self.d_head).transpose(1, 2)

        # Scaled dot-product attention
        attn_scores = torch.matmul(q, k.transpose(-2, -1)) / (self.d_head**0.5)

        # Apply causal mask
        if attention_mask is None:
            # Create causal mask
            causal_mask = torch.triu(
                torch.ones(seq_len, seq_len, device=x.device), diagonal=1
            ).bool()
            attn_scores = attn_scores.masked_fill(causal_mask, float("-inf"))
        else:
            attn_scores = attn_scores + attention_mask

        # Softmax and dropout
        attn_weights = torch.softmax(attn_scores, dim=-1)
        attn_weights = self.attn_dropout(attn_weights)

        # Apply attention to values
        output = torch.matmul(attn_weights, v)

        # Reshape and project
        output = output.transpose(1, 2).contiguous().view(batch_size, seq_len, self.d_model)
        output = self.proj(output)
        return self.resid_dropout(output)
