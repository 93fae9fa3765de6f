"""Buggy: the output projection is made in __init__ and never applied: forward returns the merged heads as they are.

Style: an instructor's trial of a grading batch (a student who wrote the lesson's layer and forgot the last line).
The parameter count is the lesson's, so param-count passes, and the mistake shows only in the numbers: the module
computes no-output-projection's outputs value for value (it was "no known mistake matches" while the weight
mapping had matched that very mistake).
"""
import torch
import torch.nn as nn


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length):
        super().__init__()
        assert d % nheads == 0
        self.h, self.dh = nheads, d // nheads
        self.q, self.k, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.out = nn.Linear(d, d)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, d = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return ctx  # BUG: self.out(ctx)


TARGET = "CausalMHA"
EXPECT = ("gradient-match", "parameters-used", "reference-match")
DIAGNOSIS = "no-output-projection"  # the mutant this mistake should be diagnosed as
