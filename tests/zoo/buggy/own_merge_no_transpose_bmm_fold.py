"""Buggy (student style, merge-no-transpose): the heads, folded into the batch for torch.bmm as (B·H, T, dh), are
merged back with `o.reshape(B, T, D)` straight away: the memory order is (B, H, T, dh), so each output row is a
jumble of several positions of one head (a student's trial: the report named the mistake without a line, and trace
marked nothing).  The split, reshape(B, T, H, dh).transpose(1, 2).reshape(B·H, T, dh), is right.

Style: Wq / Wk / Wv / Wo, heads folded into the batch axis, torch.bmm, a float tril buffer compared with 0.
"""
import math

import torch
import torch.nn as nn


class FoldedHeadsAttention(nn.Module):
    """Heads folded into the batch axis for torch.bmm."""

    def __init__(self, dim, heads, seq_len):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.dh = dim // heads
        self.Wq = nn.Linear(dim, dim, bias=False)
        self.Wk = nn.Linear(dim, dim, bias=False)
        self.Wv = nn.Linear(dim, dim, bias=False)
        self.Wo = nn.Linear(dim, dim)
        self.register_buffer("tri", torch.tril(torch.ones(seq_len, seq_len)))

    def forward(self, x):
        B, T, D = x.shape
        q = self.Wq(x).reshape(B, T, self.heads, self.dh).transpose(1, 2).reshape(B * self.heads, T, self.dh)
        k = self.Wk(x).reshape(B, T, self.heads, self.dh).transpose(1, 2).reshape(B * self.heads, T, self.dh)
        v = self.Wv(x).reshape(B, T, self.heads, self.dh).transpose(1, 2).reshape(B * self.heads, T, self.dh)
        w = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(self.dh)
        w = w.masked_fill(self.tri[:T, :T] == 0, float("-inf"))
        w = torch.softmax(w, dim=-1)
        o = torch.bmm(w, v)  # (B*H, T, dh)
        o = o.reshape(B, T, D)
        return self.Wo(o)


TARGET = "FoldedHeadsAttention"
EXPECT = ("reference-match", "gradient-match", "causal-leakage")
DIAGNOSIS = "merge-no-transpose"
LINE = 37
