"""Buggy (student style, keys-wrong-transpose): the keys (B, H, T, hd) are transposed on axes 1 and 2 instead of
their last two, so the scores' product raises a shape error.

Style: `Wq` / `Wk` / `Wv` / `Wo`, scores `att` with torch.matmul, a mask buffer `causal`.
"""
import math

import torch
import torch.nn as nn


class CausalMHA(nn.Module):
    def __init__(self, d_model, n_heads, context_length):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.hd = n_heads, d_model // n_heads
        self.Wq = nn.Linear(d_model, d_model)
        self.Wk = nn.Linear(d_model, d_model)
        self.Wv = nn.Linear(d_model, d_model)
        self.Wo = nn.Linear(d_model, d_model)
        self.register_buffer("causal", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, T, D = x.shape
        q = self.Wq(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        k = self.Wk(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        v = self.Wv(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        att = torch.matmul(q, k.transpose(1, 2)) / math.sqrt(self.hd)
        att = torch.softmax(att.masked_fill(self.causal[:T, :T], float("-inf")), dim=-1)
        return self.Wo(torch.matmul(att, v).transpose(1, 2).reshape(B, T, D))


TARGET = "CausalMHA"
EXPECT = ("output-shape",)
DIAGNOSIS = "keys-wrong-transpose"
LINE = 28
