"""Transformer-Variants' MultiHeadSelfAttention (PyPI distribution transformers-from-scratch, package
transformer_variants): a ModuleList of SingleHeadSelfAttention heads, each with its own q_proj/k_proj/v_proj
Linear(d_model, d_head, bias=False) and an nn.Softmax(-1) MODULE; scores / sqrt(d_key); the mask is an ARGUMENT, a
BoolTensor where True marks positions to ignore ([B, T, T] or [1, T, T]), filled with -inf; heads concatenated into
out_proj Linear(d_model, d_model, bias=False). Causal only through the mask the caller passes: the package's
DecoderOnlyTransformer builds ones(T, T).triu(1).unsqueeze(0).

Source: https://github.com/etfrer-yi/Transformer-Variants (the PyPI project's repository), file
transformer_variants/model.py as released in transformers-from-scratch 0.1.2 on PyPI.
Licence: MIT (Copyright (c) 2026 etfrer-yi), LICENSE in the wheel's dist-info.
Copied: verbatim from the file transformer_variants/model.py of the PyPI wheel transformers_from_scratch==0.1.2 (pip
download --no-deps): its imports (lines 18-22) and the classes SingleHeadSelfAttention and MultiHeadSelfAttention
(lines 74-120); the other classes are left out. ADDED: this entry's constants after the imports.
Truth: correct given its mask: called as m(x, triu(ones(n, n), 1).bool()[None]) it is mha_forward with the heads'
weights stacked and out_proj, exactly (1e-10); without a mask it is bidirectional. Lesson rules not followed: no bias
on the output projection (nor on q/k/v); no context length.
"""
import math
import torch
from torch import Tensor, BoolTensor
import torch.nn as nn
import torch.nn.functional as F

TARGET = "MultiHeadSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("per-head-modules", "softmax-module", "causal-only-through-mask-arg", "mask-bool-true-ignored",
             "out-proj-no-bias", "no-context-length")
FORWARD = "x, mask=None"
NOTES = ("MultiHeadSelfAttention(d_model, n_heads). forward(x, mask=None) -> (B, T, d_model); mask [B, T, T] or "
         "[1, T, T], True = ignore.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'out-proj-no-bias'
EXPECTED_BECAUSE = "the lesson's math per head given its True-is-ignored mask; only the output projection's bias is missing"


class SingleHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, d_key: int, d_val: int):
        super().__init__()
        self.softmax = nn.Softmax(-1)
        self.q_proj = nn.Linear(d_model, d_key, bias=False)
        self.k_proj = nn.Linear(d_model, d_key, bias=False)
        self.v_proj = nn.Linear(d_model, d_val, bias=False)

    def forward(self, x: Tensor, mask: BoolTensor = None):
        # x: [B, T, d_model], mask: [B, T, T] or [1, T, T]
        Q = self.q_proj(x)                                             # [B, T, d_key]
        K = self.k_proj(x)                                             # [B, T, d_key]
        V = self.v_proj(x)                                             # [B, T, d_val]
        attn_scores = torch.matmul(Q, K.transpose(-1, -2)) / math.sqrt(K.size(-1))  # [B, T, T]
        if mask is not None:
            attn_scores = attn_scores.masked_fill(mask, float('-inf'))
        return torch.matmul(self.softmax(attn_scores), V)              # [B, T, d_val]


class MultiHeadCrossAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        assert d_model % n_heads == 0
        d_head = d_model // n_heads
        self.heads = nn.ModuleList([
            SingleHeadCrossAttention(d_model, d_head, d_head) for _ in range(n_heads)
        ])
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, src: Tensor, tgt: Tensor, mask: BoolTensor = None):
        # src: [B, T_src, d_model], tgt: [B, T_tgt, d_model], mask: [B, 1, T_src] or [B, T_tgt, T_src]
        return self.out_proj(torch.cat([head(src, tgt, mask) for head in self.heads], dim=-1))  # [B, T_tgt, d_model]


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        assert d_model % n_heads == 0
        d_head = d_model // n_heads
        self.heads = nn.ModuleList([
            SingleHeadSelfAttention(d_model, d_head, d_head) for _ in range(n_heads)
        ])
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: Tensor, mask: BoolTensor = None):
        # x: [B, T, d_model], mask: [B, T, T] or [1, T, T]
        return self.out_proj(torch.cat([head(x, mask) for head in self.heads], dim=-1))  # [B, T, d_model]
