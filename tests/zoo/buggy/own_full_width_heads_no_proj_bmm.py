"""Buggy (student style, full-width-heads-no-projection): every head projects the input with its own d_model ->
d_model Linears, so n_heads heads are n_heads times the lesson's parameters, and their outputs are only laid side
by side (torch.cat): n_heads * d_model features a token and no output projection.

Style: `q_lin`, `k_lin`, `v_lin` with their biases, scores and mixing with torch.bmm scaled by math.sqrt, a boolean
`upper` buffer made with triu(diagonal=1); `ConcatHeads(d_model, n_heads, context_len)` holds the heads in a
ModuleList.  The line to change is a head's query projection, as wide as the whole layer (its keys and values
alike).
"""
import math

import torch
import torch.nn as nn


class RawHead(nn.Module):
    def __init__(self, d_model, context_len):
        super().__init__()
        self.q_lin = nn.Linear(d_model, d_model)
        self.k_lin = nn.Linear(d_model, d_model)
        self.v_lin = nn.Linear(d_model, d_model)
        self.register_buffer("upper", torch.triu(torch.ones(context_len, context_len, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        n = x.size(1)
        q, k, v = self.q_lin(x), self.k_lin(x), self.v_lin(x)
        att = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(k.size(-1))
        att = torch.softmax(att.masked_fill(self.upper[:n, :n], float("-inf")), dim=-1)
        return torch.bmm(att, v)


class ConcatHeads(nn.Module):
    def __init__(self, d_model, n_heads, context_len):
        super().__init__()
        self.heads = nn.ModuleList([RawHead(d_model, context_len) for _ in range(n_heads)])

    def forward(self, x):
        return torch.cat([h(x) for h in self.heads], dim=-1)


TARGET = "ConcatHeads"
EXPECT = ("output-shape", "param-count", "head-invariance")
DIAGNOSIS = "full-width-heads-no-projection"
LINE = 19
