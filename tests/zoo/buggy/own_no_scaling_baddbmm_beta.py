"""Buggy (student style, no-scaling): heads folded into the batch and the scores made by torch.baddbmm with the mask
as its input, the scale given to the mask (beta) instead of the scores (alpha=1.0).  Found by a student's trial:
named no-scaling at the right line, but the fix set alpha and kept the wrong beta; now the beta goes too.

Style: `c_q` / `c_k` / `c_v` / `c_proj`, `_fold`, a -inf buffer `neg_mask`, torch.bmm for the values.
"""
import math

import torch
import torch.nn as nn


class BaddbmmAttention(nn.Module):
    """Heads folded into the batch, scores with torch.baddbmm (mask added as the bias input)."""

    def __init__(self, width, heads, n_ctx):
        super().__init__()
        assert width % heads == 0, "width must divide into heads"
        self.heads = heads
        self.hs = width // heads
        self.c_q = nn.Linear(width, width)
        self.c_k = nn.Linear(width, width)
        self.c_v = nn.Linear(width, width)
        self.c_proj = nn.Linear(width, width)
        neg = torch.full((n_ctx, n_ctx), float("-inf")).triu(1)
        self.register_buffer("neg_mask", neg)

    def _fold(self, t, B, T):
        # (B, T, width) -> (B*heads, T, hs)
        return t.view(B, T, self.heads, self.hs).transpose(1, 2).reshape(B * self.heads, T, self.hs)

    def forward(self, x):
        B, T, W = x.shape
        q = self._fold(self.c_q(x), B, T)
        k = self._fold(self.c_k(x), B, T)
        v = self._fold(self.c_v(x), B, T)
        bias = self.neg_mask[:T, :T].expand(B * self.heads, T, T)
        scores = torch.baddbmm(bias, q, k.transpose(1, 2), beta=1.0 / math.sqrt(self.hs), alpha=1.0)
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.bmm(probs, v)
        ctx = ctx.view(B, self.heads, T, self.hs).transpose(1, 2).reshape(B, T, W)
        return self.c_proj(ctx)


TARGET = "BaddbmmAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "no-scaling"
LINE = 38
