"""Buggy (student style, no-scaling): the scores are never divided by sqrt(head width), so the softmax is too
peaked.

Style: heads folded into the batch, (B*H, T, hd), with torch.bmm; projections `to_q` / `to_k` / `to_v`, an output
`to_out`, a boolean mask buffer `future`.
"""
import torch
import torch.nn as nn


class BmmAttention(nn.Module):
    def __init__(self, dim, heads, context):
        super().__init__()
        assert dim % heads == 0
        self.heads, self.hd = heads, dim // heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.register_buffer("future", torch.triu(torch.ones(context, context, dtype=torch.bool), diagonal=1))

    def fold(self, t, B, T):
        return t.view(B, T, self.heads, self.hd).transpose(1, 2).reshape(B * self.heads, T, self.hd)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.fold(self.to_q(x), B, T), self.fold(self.to_k(x), B, T), self.fold(self.to_v(x), B, T)
        att = torch.bmm(q, k.transpose(1, 2))
        att = att.masked_fill(self.future[:T, :T], float("-inf")).softmax(-1)
        out = torch.bmm(att, v).view(B, self.heads, T, self.hd).transpose(1, 2).reshape(B, T, D)
        return self.to_out(out)


TARGET = "BmmAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "no-scaling"
LINE = 28
