"""Correct: an nn.ModuleList of `Head` modules, each with raw nn.Parameter matrices `wq`, `wk`, `wv` of shape
(d_model, d_head) used as `x @ W`, and a raw output matrix `wo` (used as `out @ wo`) with its bias `bo`.

Style: Karpathy's per-head layer rewritten with raw parameters by someone who thinks of a projection as X W. The
mask is passed to every head from the layer's `future` buffer; the keys are transposed with `.mT`. From a student
trial (issue 28): the reading proven with two heads ((d, d/2) matrices, whose orientation the shapes tell) was not
found again with one head, where each head's matrix is square and both orientations are offered: the wrong one
was taken, and this correct layer failed reference-match and gradient-match at d=2, heads=1.
"""
import math

import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self, d_model: int, d_head: int):
        super().__init__()
        self.wq = nn.Parameter(torch.randn(d_model, d_head) / math.sqrt(d_model))
        self.wk = nn.Parameter(torch.randn(d_model, d_head) / math.sqrt(d_model))
        self.wv = nn.Parameter(torch.randn(d_model, d_head) / math.sqrt(d_model))

    def forward(self, x: torch.Tensor, future: torch.Tensor) -> torch.Tensor:
        q, k, v = x @ self.wq, x @ self.wk, x @ self.wv
        att = (q @ k.mT) / math.sqrt(q.shape[-1])
        att = att.masked_fill(future, float("-inf"))
        return att.softmax(dim=-1) @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, context_length: int):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("n_heads must divide d_model")
        self.heads = nn.ModuleList(Head(d_model, d_model // n_heads) for _ in range(n_heads))
        self.wo = nn.Parameter(torch.randn(d_model, d_model) / math.sqrt(d_model))
        self.bo = nn.Parameter(torch.zeros(d_model))
        self.register_buffer("future", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        n = x.shape[1]
        out = torch.cat([h(x, self.future[:n, :n]) for h in self.heads], dim=-1)
        return out @ self.wo + self.bo


TARGET = "MultiHeadAttention"
EXPECT = ()
