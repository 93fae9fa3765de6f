"""GPT-from-scratch's MHAttention (Matin Khajavi's GPT-2 reproduction): MHAttention(d_in, d_out, n_heads,
dropout=0.1, qkv_bias=False) with an assert on divisibility, ONE fused qkv Linear split [Q; K; V] with
`qkv.split(self.d_out, dim=2)`, the three head views written keys first (`key = k.view(...)` before query and value),
F.scaled_dot_product_attention(is_causal=True, dropout_p gated by self.training), a `proj` Linear with bias; no
context length and no mask buffer.

Source: https://github.com/MatinKhajavi/GPT-from-scratch (gpt-from-scratch 1.1 on PyPI, the distribution's
Home-page), file gpt_from_scratch/models/_modules.py as released in gpt-from-scratch 1.1 (its only release).
Licence: MIT (the wheel's METADATA "License: MIT" and classifier "License :: OSI Approved :: MIT License", author
Matin Khajavi; the wheel carries no licence file).
Copied: verbatim from the PyPI wheel gpt-from-scratch==1.1 (pip download --no-deps): lines 1-4 of
gpt_from_scratch/models/_modules.py (imports) and lines 8-65 (MHAttention).  Left out: line 5 (`from
gpt_from_scratch.models.utils import GPTConfig`, used only by the block classes not copied), GELU, LayerNorm,
FeedForward and TransformerBlock.
ADDED: this entry's constants.
Truth: correct: mha_forward with qkv's three row blocks (and bias thirds when qkv_bias=True) as W_q, W_k, W_v and
proj as W_o (its bias), to float64 rounding, no leak; in eval() dropout is off (in _truth.py).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F
from typing import Dict, Any


TARGET = "MHAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("fused-qkv-split", "sdpa-is-causal", "no-context-length", "keys-first-views", "dropout-default-0.1")
FORWARD = "x"
NOTES = ("MHAttention(d_in, d_out, n_heads, dropout=0.1, qkv_bias=False); forward(x) -> (B, n, d_out)")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = "the lesson's layer through SDPA is_causal, with a fused [Q; K; V] projection split by d_out"

class MHAttention(nn.Module):
    """
    Implements a multihead attention with PyTorch's scaled dot product attention.

    :param d_in: Input embedding size.
    :type d_in: int
    :param d_out: Output embedding size. Must be divisible by n_heads.
    :type d_out: int
    :param n_heads: Number of attention heads.
    :type n_heads: int
    :param dropout: Dropout probability (default: 0.0).
    :type dropout: float, optional
    :param qkv_bias: Whether to add a bias term to the QKV transformations (default: False).
    :type qkv_bias: bool, optional

    The model expects input tensors of shape (batch_size, number_of_tokens, d_in).
    The output tensors are of shape (batch_size, number_of_tokens, d_out).
    """

    def __init__(self, d_in: int, d_out: int, n_heads: int, dropout: float = 0.1, qkv_bias: bool = False) -> None:
        super().__init__()

        assert d_out % n_heads == 0, "Output embedding size (d_out) must be divisible by n_heads"

        self.d_out = d_out
        self.d_head = d_out // n_heads
        self.n_heads = n_heads
        self.dropout = dropout

        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.proj = nn.Linear(d_out, d_out)
        self.proj.SCALE_INIT = 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Forward pass of the multi-head attention mechanism.

        :param x: Input tensor of shape (batch_size, number_of_tokens, d_in).
        :type x: torch.Tensor
        :returns: Output tensor of shape (batch_size, number_of_tokens, d_out).
        :rtype: torch.Tensor
        """
        n_batches, n_tokens, _ = x.shape

        qkv = self.qkv(x)

        q, k, v = qkv.split(self.d_out, dim=2)
        key = k.view(n_batches, n_tokens, self.n_heads, self.d_head).transpose(1, 2) 
        query = q.view(n_batches, n_tokens, self.n_heads, self.d_head).transpose(1, 2) 
        value = v.view(n_batches, n_tokens, self.n_heads, self.d_head).transpose(1, 2)

        use_dropout = self.dropout if self.training else 0.0

        context_vec = F.scaled_dot_product_attention(query, key, value, is_causal=True, dropout_p=use_dropout)
        context_vec = context_vec.transpose(1, 2).contiguous().view(n_batches, n_tokens, self.d_out)

        context_vec = self.proj(context_vec)
        return context_vec
