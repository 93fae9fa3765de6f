"""Buggy (student style, split-view-order): the heads are split with two reshapes,
`.reshape(B, n, H, dh).reshape(B, H, n, dh)`, where the second should be transpose(1, 2): a reshape keeps the values
in their order, so each head's "positions" are cut across tokens (found by a student's trial: the report named the
mistake without a line, and trace called the second reshape a correct split).

Style: wq / wk / wv / wo, `head_dim`, a boolean triu buffer, softmax as a tensor method.
"""
import torch
import torch.nn as nn


class ReshapeAttention(nn.Module):
    def __init__(self, d_model, n_heads, context_length):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.wq = nn.Linear(d_model, d_model)
        self.wk = nn.Linear(d_model, d_model)
        self.wv = nn.Linear(d_model, d_model)
        self.wo = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        B, n, d = x.shape
        q = self.wq(x).reshape(B, n, self.n_heads, self.head_dim).reshape(B, self.n_heads, n, self.head_dim)
        k = self.wk(x).reshape(B, n, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).reshape(B, n, self.n_heads, self.head_dim).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / self.head_dim ** 0.5
        att = att.masked_fill(self.mask[:n, :n], float("-inf")).softmax(-1)
        return self.wo((att @ v).transpose(1, 2).reshape(B, n, d))


TARGET = "ReshapeAttention"
EXPECT = ("view-order", "reference-match", "gradient-match", "causal-leakage")
DIAGNOSIS = "split-view-order-queries"
LINE = 25
