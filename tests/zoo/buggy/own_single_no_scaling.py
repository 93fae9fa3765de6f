"""Buggy (student style, single-no-scaling): one causal attention head whose scores are never divided by the square
root of the keys' width.

Style: one head with `W_q` / `W_k` / `W_v` (no output projection), scores `att` by torch.bmm, a boolean `future`.
"""
import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self, d_in, d_out, context_length):
        super().__init__()
        self.W_q = nn.Linear(d_in, d_out, bias=False)
        self.W_k = nn.Linear(d_in, d_out, bias=False)
        self.W_v = nn.Linear(d_in, d_out, bias=False)
        self.register_buffer("future", torch.ones(context_length, context_length, dtype=torch.bool).triu(1))

    def forward(self, x):
        T = x.shape[1]
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        att = torch.bmm(q, k.transpose(1, 2))
        att = att.masked_fill(self.future[:T, :T], float("-inf")).softmax(dim=-1)
        return torch.bmm(att, v)


TARGET = "Head"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "single-no-scaling"
LINE = 21
