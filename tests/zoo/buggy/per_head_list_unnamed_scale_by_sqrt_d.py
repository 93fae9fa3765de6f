"""Buggy (scale-by-sqrt-d): Karpathy's per-head modules with projections named `a`, `b`, `c` (names that say no
role, issue 28 item 1), each head scaling its scores by the model width instead of its own.

Style: an nn.ModuleList of `Head` modules, each with three nn.Linear(d, d // n_heads, bias=False) used as query, key
and value in declared order, a `tril` buffer, the heads concatenated and mixed by `proj = nn.Linear(d, d)`.  The
head is given the model width `d` and divides by its square root.  No order of the three projections makes this the
lesson's layer (the scale is wrong in every one): under the declared order it is this one mistake, and it is named.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
    def __init__(self, d, hs, block):
        super().__init__()
        self.d = d
        self.a = nn.Linear(d, hs, bias=False)
        self.b = nn.Linear(d, hs, bias=False)
        self.c = nn.Linear(d, hs, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block, block)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.a(x), self.b(x), self.c(x)
        wei = q @ k.transpose(-2, -1) * self.d ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return F.softmax(wei, dim=-1) @ v


class MultiHead(nn.Module):
    def __init__(self, d, n_heads, block):
        super().__init__()
        assert d % n_heads == 0
        self.heads = nn.ModuleList([Head(d, d // n_heads, block) for _ in range(n_heads)])
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in self.heads], dim=-1))


TARGET = "MultiHead"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-by-sqrt-d"
