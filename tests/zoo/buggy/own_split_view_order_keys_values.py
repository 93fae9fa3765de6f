"""Buggy (student style, split-view-order-keys-values): the queries are split right, view(B, T, H, hd) then
transpose(1, 2), but the keys and values are viewed straight as (B, H, T, hd), which reads each "head" out of
consecutive rows of features: shapes fit, the numbers are scrambled across tokens, and the future leaks in.

Style: `Wq` / `Wk` / `Wv` / `Wo`, `hd`, scores `att` by torch.matmul, a float tril buffer compared with 0.
"""
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.hd = n_heads, d_model // n_heads
        self.Wq = nn.Linear(d_model, d_model)
        self.Wk = nn.Linear(d_model, d_model)
        self.Wv = nn.Linear(d_model, d_model)
        self.Wo = nn.Linear(d_model, d_model)
        self.register_buffer("tril", torch.tril(torch.ones(max_len, max_len)))

    def forward(self, x):
        B, T, D = x.shape
        q = self.Wq(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        k = self.Wk(x).view(B, self.n_heads, T, self.hd)
        v = self.Wv(x).view(B, self.n_heads, T, self.hd)
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.hd)
        att = att.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).contiguous().view(B, T, D)
        return self.Wo(y)


TARGET = "CausalSelfAttention"
EXPECT = ("reference-match", "gradient-match", "causal-leakage", "view-order")
DIAGNOSIS = "split-view-order-keys-values"
LINE = 27  # the keys' line; the values' (28) is marked too
