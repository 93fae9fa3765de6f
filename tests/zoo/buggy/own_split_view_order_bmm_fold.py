"""Buggy (student style, split-view-order): the heads are folded into the batch for torch.bmm with
`self.Wq(x).reshape(B * self.heads, T, self.dh)` straight from (B, T, D): the memory order is (B, H, T, dh), so each
head's "positions" are cut across tokens (a student's trial: the report named the mistake without a line, and
trace marked nothing).  The merge, view(B, H, T, dh).transpose(1, 2), is right.

Style: Wq / Wk / Wv / Wo, heads folded into the batch axis (B·H, T, dh), torch.bmm, a float tril buffer compared
with 0.
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
        q = self.Wq(x).reshape(B * self.heads, T, self.dh)
        k = self.Wk(x).reshape(B * self.heads, T, self.dh)
        v = self.Wv(x).reshape(B * self.heads, T, self.dh)
        w = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(self.dh)
        w = w.masked_fill(self.tri[:T, :T] == 0, float("-inf"))
        w = torch.softmax(w, dim=-1)
        o = torch.bmm(w, v)  # (B*H, T, dh)
        o = o.view(B, self.heads, T, self.dh).transpose(1, 2).reshape(B, T, D)
        return self.Wo(o)


TARGET = "FoldedHeadsAttention"
EXPECT = ("view-order", "reference-match", "gradient-match", "causal-leakage")
DIAGNOSIS = "split-view-order"
LINE = 31
