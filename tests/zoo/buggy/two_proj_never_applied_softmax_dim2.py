"""Buggy (softmax-wrong-axis, beside an output projection `self.proj` made and never applied): the softmax over
the queries (dim=-2), and forward returns the merged heads without self.proj.

Style: lucidrains-like to_q / to_k / to_v without biases, a boolean triu mask `mask`, `.softmax(-2)` chained.
The report named softmax-wrong-axis with weights-under-no-grad riding along, read from parameters-used's "unused
parameter" (issue 28): proj's parameters, the output projection's, get no gradient because it is never applied.
Now both are named from the numbers: the softmax's axis at its line, the projection at the return line.
"""
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, heads, max_len):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), 1))

    def forward(self, x):
        b, n, d = x.shape
        h = self.heads
        q = self.to_q(x).view(b, n, h, d // h).transpose(1, 2)
        k = self.to_k(x).view(b, n, h, d // h).transpose(1, 2)
        v = self.to_v(x).view(b, n, h, d // h).transpose(1, 2)
        s = q @ k.transpose(-2, -1) / (d // h) ** 0.5
        s = s.masked_fill(self.mask[:n, :n], float("-inf"))
        out = s.softmax(-2) @ v
        out = out.transpose(1, 2).reshape(b, n, d)
        return out


TARGET = "Attention"
EXPECT = ("reference-match", "gradient-match", "parameters-used")
DIAGNOSIS = ("softmax-wrong-axis", "no-output-projection")  # two mistakes at once: both named, each at its line
LINES = (32, 34)
