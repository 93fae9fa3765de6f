"""Buggy (query-for-keys): Karpathy's per-head modules with projections named `lin1`, `lin2`, `lin3` (names that say
no role, issue 28 item 1), each head taking its keys from the projection it takes its queries from.

Style: an nn.ModuleList of `Head` modules, each with three nn.Linear(d, d // n_heads, bias=False) (the queries',
the keys' and the values', in that order), the keys computed with `self.lin1` where `self.lin2` was meant, a `tril`
buffer, the heads concatenated and mixed by `proj = nn.Linear(d, d)`.  No order of the three projections makes this
the lesson's layer (one of them is never used): read in every order, exactly one makes it this known mistake.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
    def __init__(self, d, hs, block):
        super().__init__()
        self.lin1 = nn.Linear(d, hs, bias=False)
        self.lin2 = nn.Linear(d, hs, bias=False)
        self.lin3 = nn.Linear(d, hs, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block, block)))

    def forward(self, x):
        B, T, C = x.shape
        q = self.lin1(x)
        k = self.lin1(x)
        v = self.lin3(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
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
EXPECT = ("reference-match", "gradient-match", "parameters-used")
DIAGNOSIS = "query-for-keys"
