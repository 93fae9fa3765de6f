"""Correct (heads on strided features, split and merged alike): each head takes every H-th feature of q, k and v
(`view(B, T, hd, nh).permute(0, 3, 1, 2)`) and its outputs go back to those same features
(`permute(0, 2, 3, 1).reshape(B, T, C)`) before the output projection.

Style: a student's compact layer (a student trial, issue 28 "trust on unseen code"), lambdas for the split, a
`fut` boolean buffer.  Not the lesson's split (view(B, T, nh, hd)), but the same layer: the lesson's with the rows of
W_q, W_k, W_v and the columns of W_o renumbered alike (head h's rows h, h + nh, h + 2·nh, ...), which mha-check
reads and proves; a split and merge that do not agree are mistakes (tests/zoo/buggy/strided_*).
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
        att = (q @ k.transpose(-1, -2) / self.hd ** 0.5).masked_fill(self.fut[:T, :T], float("-inf")).softmax(-1)
        y = (att @ v).permute(0, 2, 3, 1).reshape(B, T, self.nh * self.hd)
        return self.Wo(y)


TARGET = "StridedHeads"
EXPECT = ()
