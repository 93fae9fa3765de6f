"""Buggy (scale-by-sqrt-d, with the heads merged rolled by one): the scores are divided by sqrt(d), the model width,
instead of sqrt(dh), the head width, and the heads are rolled by one place along the heads axis before the merge.

Style: the lesson's CausalMHA with separate q/k/v/out Linear layers, `split`, `ctx`, `self.out` and a boolean
`mask` buffer; `torch.roll(ctx, 1, dims=1)` puts the last head first.  The roll alone is the lesson's layer with
W_o's input columns read in that head order (tests/zoo/correct/heads_merged_rolled.py); the scale is the mistake.
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
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / d ** 0.5
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        ctx = torch.softmax(scores, dim=-1) @ v
        ctx = torch.roll(ctx, 1, dims=1).transpose(1, 2).contiguous().view(B, n, d)
        return self.out(ctx)


TARGET = "CausalMHA"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-by-sqrt-d"  # the mutant this mistake should be diagnosed as
