"""Buggy (single-scale-by-d-in): one head built as SingleHeadCausal(d_in, d_k, d_v, context_length), its scores
divided by the square root of the input's width, x.shape[-1] ** 0.5, instead of the keys' width d_k (a student's
trial: mha-check built it with d_k = d_v = d_in, where the two scales agree, and passed it).

Style: `query` / `key` / `value` Linear without bias, torch.bmm, an in-place masked_fill_ with -torch.inf on a float
`mask` buffer made bool at each call, no output projection.
"""
import torch
from torch import nn


class SingleHeadCausal(nn.Module):
    """One head: d_in -> d_k for queries and keys, d_in -> d_v for values."""

    def __init__(self, d_in, d_k, d_v, context_length):
        super().__init__()
        self.d_k = d_k
        self.query = nn.Linear(d_in, d_k, bias=False)
        self.key = nn.Linear(d_in, d_k, bias=False)
        self.value = nn.Linear(d_in, d_v, bias=False)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        n = x.shape[-2]
        q, k, v = self.query(x), self.key(x), self.value(x)
        scores = torch.bmm(q, k.transpose(1, 2)) / x.shape[-1] ** 0.5
        scores.masked_fill_(self.mask.bool()[:n, :n], -torch.inf)
        return torch.bmm(torch.softmax(scores, dim=-1), v)


TARGET = "SingleHeadCausal"
EXPECT = ("reference-match",)
DIAGNOSIS = "single-scale-by-d-in"
LINE = 26
