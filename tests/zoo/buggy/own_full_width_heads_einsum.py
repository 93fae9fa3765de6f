"""Buggy (student style, full-width-heads): each head is a small module of its own that sees every feature, its
query, key and value projections all emb -> emb, so n_head heads hold n_head times the lesson's parameters and a
`proj` squeezes their concatenation (n_head * emb) back to emb.

Style: a `Scorer` head with `wq`, `wk`, `wv`, its scores by einsum("bqe,bke->bqk"), an additive -inf mask buffer
`causal` made with torch.full(...).triu(1); the layer `ManyHeads(emb, n_head, window)` keeps the heads in a ModuleList
`team` and merges them with torch.cat.  The line to change is the head's query projection, as wide as the whole
layer (its keys and values alike).
"""
import torch
import torch.nn as nn


class Scorer(nn.Module):
    def __init__(self, emb, window):
        super().__init__()
        self.wq = nn.Linear(emb, emb, bias=False)
        self.wk = nn.Linear(emb, emb, bias=False)
        self.wv = nn.Linear(emb, emb, bias=False)
        self.register_buffer("causal", torch.full((window, window), float("-inf")).triu(1))

    def forward(self, x):
        t = x.shape[1]
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        s = torch.einsum("bqe,bke->bqk", q, k) / q.shape[-1] ** 0.5 + self.causal[:t, :t]
        return torch.einsum("bqk,bke->bqe", s.softmax(dim=-1), v)


class ManyHeads(nn.Module):
    def __init__(self, emb, n_head, window):
        super().__init__()
        self.team = nn.ModuleList(Scorer(emb, window) for _ in range(n_head))
        self.proj = nn.Linear(n_head * emb, emb)

    def forward(self, x):
        return self.proj(torch.cat([head(x) for head in self.team], dim=-1))


TARGET = "ManyHeads"
EXPECT = ("param-count", "head-invariance")
DIAGNOSIS = "full-width-heads"
LINE = 17
