"""Buggy (student style, scale-by-dh): the scores are divided by the head width itself, not its square root, so
the softmax is too flat.

Style: `query` / `key` / `value` and an output `out`, the scores `att`, a boolean mask buffer `mask`.
"""
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, emb, heads, ctx_len):
        super().__init__()
        assert emb % heads == 0
        self.heads, self.head_dim = heads, emb // heads
        self.query = nn.Linear(emb, emb, bias=False)
        self.key = nn.Linear(emb, emb, bias=False)
        self.value = nn.Linear(emb, emb, bias=False)
        self.out = nn.Linear(emb, emb)
        self.register_buffer("mask", torch.triu(torch.ones(ctx_len, ctx_len, dtype=torch.bool), 1))

    def forward(self, x):
        b, t, e = x.shape
        q = self.query(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.key(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = self.value(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / self.head_dim
        att = att.masked_fill(self.mask[:t, :t], float("-inf")).softmax(dim=-1)
        return self.out((att @ v).transpose(1, 2).reshape(b, t, e))


TARGET = "Attention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-by-dh"
LINE = 26
