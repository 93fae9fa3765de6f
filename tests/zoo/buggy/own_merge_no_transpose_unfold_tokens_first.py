"""Buggy (student style, merge-no-transpose): the heads, folded into the batch for torch.bmm as (B·H, T, dh), are
unfolded with `y.view(B, T, self.h, dh)`, as if the tokens came before the heads, then reshaped to (B, T, D): in
memory the folded tensor is (B, H, T, dh), so each output row is a jumble of several positions of one head (a
trial's: the report named the mistake without a line and `trace` marked nothing; the line-fix then inserted a
transpose after the wrong view, which left the bug in place).  The split is right.

Style: query / key / value / out Linear layers with biases, a lambda that folds the heads, bmm, a mask made in
forward on the input's device and compared with 0.
"""
import math

import torch
import torch.nn as nn


class FoldedHeads(nn.Module):
    def __init__(self, d, h, ctx):
        super().__init__()
        assert d % h == 0
        self.h = h
        self.query = nn.Linear(d, d)
        self.key = nn.Linear(d, d)
        self.value = nn.Linear(d, d)
        self.out = nn.Linear(d, d)

    def forward(self, x):
        B, T, D = x.shape
        dh = D // self.h
        fold = lambda t: t.view(B, T, self.h, dh).transpose(1, 2).reshape(B * self.h, T, dh)  # noqa: E731
        q, k, v = fold(self.query(x)), fold(self.key(x)), fold(self.value(x))
        s = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(dh)
        mask = torch.ones(T, T, device=x.device).tril()
        s = s.masked_fill(mask == 0, float("-inf"))
        y = torch.bmm(torch.softmax(s, dim=-1), v)
        y = y.view(B, T, self.h, dh).reshape(B, T, D)
        return self.out(y)


TARGET = "FoldedHeads"
EXPECT = ("reference-match", "gradient-match", "causal-leakage")
DIAGNOSIS = "merge-no-transpose"
LINE = 35
