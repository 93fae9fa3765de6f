"""Buggy (two mistakes, one hidden behind the other): the heads are split with view(B, H, T, dk) straight from
(B, T, C) (split-view-order), and merged with `.transpose(1, 2).view(B, T, C)` without `.contiguous()`, which raises
for two heads and two tokens or more.

Every check that needs a working forward is skipped, so no number can show the split; trace marks it.  Before, the
report named the missing .contiguous() alone, as if it were the only mistake; now it names it (the evidence is the
raise) and says that more than one mistake may be present, with the split's line that trace marks.
"""
import math
import torch
import torch.nn as nn


class MHA(nn.Module):
    def __init__(self, d_model, n_heads, max_len, dropout=0.0):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.wq = nn.Linear(d_model, d_model, bias=False)
        self.wk = nn.Linear(d_model, d_model, bias=False)
        self.wv = nn.Linear(d_model, d_model, bias=False)
        self.wo = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("future", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, C = x.shape
        q = self.wq(x).view(B, self.n_heads, T, self.d_k)
        k = self.wk(x).view(B, self.n_heads, T, self.d_k)
        v = self.wv(x).view(B, self.n_heads, T, self.d_k)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.d_k)
        att = att.masked_fill(self.future[:T, :T], float("-inf"))
        att = self.drop(att.softmax(-1))
        out = (att @ v).transpose(1, 2).view(B, T, C)
        return self.wo(out)


TARGET = "MHA"
EXPECT = ("contiguity",)
DIAGNOSIS = "view-without-contiguous"  # named; split-view-order said as possibly present (trace marks it)
HIDDEN = ("split-view-order", 28)  # the mistake behind it, at its line
