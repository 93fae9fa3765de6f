"""Buggy (no-scaling, with heads on strided features split and merged alike): the scores are never divided by
sqrt(head width); each head takes every H-th feature of q, k and v (`view(B, T, hd, nh).permute(0, 3, 1, 2)`) and
its outputs go back to those same features (`permute(0, 2, 3, 1).reshape(B, T, C)`) before the output projection.

Style: a student's compact layer with lambdas for the split and a `fut` boolean buffer.  The strided split and
merge alone are the lesson's layer with its features renumbered (tests/zoo/correct/heads_strided_split_and_merge.py);
the missing scale is the mistake.  (Not swapped queries and keys: with the roles of W_q and W_k read the other way
round, that layer is the mirror of a correct one, and no mistake is named under a mirror.)
"""
import torch
from torch import nn


class StridedHeads(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        assert d_out % num_heads == 0
        self.nh, self.hd = num_heads, d_out // num_heads
        self.Wq = nn.Linear(d_in, d_out, bias=False)
        self.Wk = nn.Linear(d_in, d_out, bias=False)
        self.Wv = nn.Linear(d_in, d_out, bias=False)
        self.Wo = nn.Linear(d_out, d_out)
        self.register_buffer("fut", torch.ones(context_length, context_length).triu(1).bool())

    def forward(self, x):
        B, T, _ = x.shape
        heads = lambda t: t.view(B, T, self.hd, self.nh).permute(0, 3, 1, 2)  # (B, nh, T, hd)
        q, k, v = heads(self.Wq(x)), heads(self.Wk(x)), heads(self.Wv(x))
        att = (q @ k.transpose(-1, -2)).masked_fill(self.fut[:T, :T], float("-inf")).softmax(-1)
        y = (att @ v).permute(0, 2, 3, 1).reshape(B, T, self.nh * self.hd)
        return self.Wo(y)


TARGET = "StridedHeads"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "no-scaling"  # the mutant this mistake should be diagnosed as
