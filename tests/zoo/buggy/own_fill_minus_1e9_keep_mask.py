"""Buggy (student style, fill-minus-1e9): the annotated transformer's `scores.masked_fill(mask == 0, -1e9)` with a
keep-mask buffer (1 = may look) of shape (1, 1, L, L), in an `attention()` helper.  Found by a student's trial: the
mask-fill rule failed with the template fix `masked_fill(mask[:n, :n], float("-inf"))`, which raised NameError
pasted (no `n`) and would have hidden the allowed positions of a keep-mask; no line was given and trace called it a
note.  Now fill-minus-1e9 is named at the fill with the student's own line, -inf in place of -1e9.

Style: `linears` ModuleList, `d_k`, `nbatches`, `p_attn`, F.dropout with training=self.training.
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalMHA(nn.Module):
    def __init__(self, d_model, h, max_len=256, dropout=0.1):
        super().__init__()
        assert d_model % h == 0
        self.h = h
        self.d_k = d_model // h
        self.p = dropout
        self.linears = nn.ModuleList([nn.Linear(d_model, d_model, bias=False) for _ in range(3)])
        self.out = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.tril(torch.ones(1, 1, max_len, max_len)))

    def attention(self, q, k, v, mask):
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        scores = scores.masked_fill(mask == 0, -1e9)
        p_attn = F.softmax(scores, dim=-1)
        p_attn = F.dropout(p_attn, p=self.p, training=self.training)
        return p_attn @ v

    def forward(self, x):
        nbatches, n, _ = x.shape
        q, k, v = [lin(x).view(nbatches, -1, self.h, self.d_k).transpose(1, 2) for lin in self.linears]
        y = self.attention(q, k, v, self.mask[:, :, :n, :n])
        y = y.transpose(1, 2).contiguous().view(nbatches, -1, self.h * self.d_k)
        return self.out(y)


TARGET = "CausalMHA"
EXPECT = ("mask-fill",)
DIAGNOSIS = "fill-minus-1e9"
LINE = 28  # the masked_fill with -1e9
