"""Buggy (by the lesson's rule only): a learnable temperature per head, initialised to 1/sqrt(dh).

Style: a student's trial layer (issue 28): `scores * self.log_tau.exp()` in place of the division by sqrt(dh). At
initialisation the math is the lesson's (reference-match and gradient-match pass), but the layer holds H more
parameters, so its count grows with the number of heads: param-count and head-invariance fail. The scores ARE
scaled: a trace mark "the scores are never scaled" is refuted by the checks made for that mistake, and following it
(dividing by sqrt(dh) as well) would break a layer whose math is right.
"""
import math

import torch
import torch.nn as nn

TARGET = "TemperatureAttention"
EXPECT = ("param-count", "head-invariance")
MUST_PASS = ("reference-match", "gradient-match", "causal-leakage")
DIAGNOSIS = None  # no catalogued mistake is this one: a count that grows with the heads by a per-head temperature


class TemperatureAttention(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length):
        super().__init__()
        assert d_out % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)
        self.out_proj = nn.Linear(d_out, d_out)
        self.log_tau = nn.Parameter(torch.full((num_heads, 1, 1), -0.5 * math.log(self.head_dim)))
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        b, n, _ = x.shape
        q = self.W_query(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.W_key(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.W_value(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * self.log_tau.exp()
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).contiguous().view(b, n, -1)
        return self.out_proj(ctx)
