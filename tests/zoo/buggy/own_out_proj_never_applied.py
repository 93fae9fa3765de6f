"""Buggy (student style, no-output-projection): `self.out_proj` is made in __init__ and never applied: forward
returns the merged heads as they are (found by a student's trial: the report named the mistake without a line,
because param-count, the check made for it, passes when the projection's parameters exist).

Style: W_query / W_key / W_value, fused mask buffer `causal`, einsum for the scores.
"""
import torch
import torch.nn as nn


class EinsumAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        assert d_out % num_heads == 0
        self.h, self.dh = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("causal", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = (w(x).view(b, n, self.h, self.dh) for w in (self.W_query, self.W_key, self.W_value))
        att = torch.einsum("bqhd,bkhd->bhqk", q, k) / self.dh ** 0.5
        att = att.masked_fill(self.causal[:n, :n], float("-inf")).softmax(dim=-1)
        ctx = torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, n, self.h * self.dh)
        return ctx


TARGET = "EinsumAttention"
EXPECT = ("reference-match", "gradient-match", "parameters-used")
DIAGNOSIS = "no-output-projection"
LINE = 28
