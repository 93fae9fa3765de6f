"""Correct: one stacked raw parameter `W` of shape (3, width, width) for Q, K and V, used as `x @ W[0]`, `x @ W[1]`,
`x @ W[2]`, and a raw output matrix `W_out` with its bias `b_out`.

Style: a TorchScript-minded student (`Final[int]` annotations, no lambdas) who keeps the three input projections as
one tensor. No parameter name says q, k or v and there is no nn.Linear, so no reading by names or by nn.Linear
layers exists; the `--map` the report suggested cannot name `W[0]`. From a student trial (issue 28): every weight
check could not tell. The boolean keep-mask buffer is not persistent and is inverted with `~` when filling.
"""
from typing import Final

import torch
import torch.nn as nn


class StackedMHA(nn.Module):
    heads: Final[int]
    width: Final[int]

    def __init__(self, width: int, heads: int, ctx: int):
        super().__init__()
        assert width % heads == 0
        self.heads = heads
        self.width = width
        self.W = nn.Parameter(torch.randn(3, width, width) / width ** 0.5)
        self.W_out = nn.Parameter(torch.randn(width, width) / width ** 0.5)
        self.b_out = nn.Parameter(torch.zeros(width))
        self.register_buffer("allowed", torch.tril(torch.ones(ctx, ctx)).bool(), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        hd = self.width // self.heads
        q = (x @ self.W[0]).view(B, T, self.heads, hd).transpose(1, 2)
        k = (x @ self.W[1]).view(B, T, self.heads, hd).transpose(1, 2)
        v = (x @ self.W[2]).view(B, T, self.heads, hd).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / (hd ** 0.5)
        att = att.masked_fill(~self.allowed[:T, :T], float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, self.width)
        return y @ self.W_out + self.b_out


TARGET = "StackedMHA"
EXPECT = ()
