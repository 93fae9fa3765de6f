"""Buggy (student style, mask-hides-past): forward(x, mask=None) takes an optional 0/1 "keep" mask (1 = may attend)
and makes its own when none is given with `torch.triu(ones)` where `torch.tril(ones)` was meant: it keeps each token
and every later one, so each token sees itself and the future, never the past.

Style: Annotated-Transformer names (`w_q`, `w_k`, `w_v`, `w_o`, `h`, `d_k`), `masked_fill(mask == 0, -inf)`, the mask
made in forward.  From a student's trial (trial6): named right at the right line, but the title said "Mask made with
torch.tril(..., diagonal=-1)", which this layer never wrote; the title now says both ways of writing the mistake.
"""
import math

import torch
from torch import nn


class MHA(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0):
        super().__init__()
        assert d_model % num_heads == 0
        self.h, self.d_k = num_heads, d_model // num_heads
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        """mask: 1 where attention is allowed, 0 where it is not; causal by default."""
        B, T, _ = x.shape
        if mask is None:
            mask = torch.triu(torch.ones(T, T, device=x.device))
        q = self.w_q(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        k = self.w_k(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        v = self.w_v(x).view(B, T, self.h, self.d_k).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        scores = scores.masked_fill(mask == 0, float("-inf"))
        attn = self.dropout(scores.softmax(dim=-1))
        return self.w_o((attn @ v).transpose(1, 2).reshape(B, T, -1))


TARGET = "MHA"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-hides-past"
LINE = 30  # the triu that makes the keep mask
