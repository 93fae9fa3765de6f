"""Buggy: the causal mask is built in forward as torch.ones(n, n).triu(1).bool() with no device argument.

Style: raw einsum code with nn.Linear projections named Wq / Wk / Wv / Wo and no context-length argument ("the
mask is built on the fly, so any length works"). On CPU it is correct; on any other device (GPU, meta) the mask
lives on the CPU while the scores do not, and masked_fill raises a device mismatch.
"""
import math

import torch
import torch.nn as nn


class OnTheFlyMaskAttention(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0):
        super().__init__()
        assert d_model % n_heads == 0
        self.h = n_heads
        self.dk = d_model // n_heads
        self.Wq = nn.Linear(d_model, d_model, bias=False)
        self.Wk = nn.Linear(d_model, d_model, bias=False)
        self.Wv = nn.Linear(d_model, d_model, bias=False)
        self.Wo = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        B, n, d = x.shape
        q = self.Wq(x).view(B, n, self.h, self.dk)
        k = self.Wk(x).view(B, n, self.h, self.dk)
        v = self.Wv(x).view(B, n, self.h, self.dk)
        s = torch.einsum("bihd,bjhd->bhij", q, k) / math.sqrt(self.dk)
        mask = torch.ones(n, n).triu(1).bool()
        s = s.masked_fill(mask, float("-inf"))
        a = self.drop(s.softmax(-1))
        o = torch.einsum("bhij,bjhd->bihd", a, v).reshape(B, n, d)
        return self.Wo(o)


TARGET = "OnTheFlyMaskAttention"
EXPECT = ("mask-buffer",)
DIAGNOSIS = "mask-no-device"  # the mutant this mistake should be diagnosed as
