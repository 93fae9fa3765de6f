"""Buggy: multi-query attention whose future scores are filled with -10 instead of -inf.

Written for issue 31 by the integrator as a held-out set (each proven correct or buggy against an independent float64
reference before mha-check was run on it), then kept here.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "MultiQueryAttention"
EXPECT = ('causal-leakage',)
DIAGNOSIS = "finite-fill"


class MultiQueryAttention(nn.Module):
    """Many query heads, one key/value head shared by all of them."""

    def __init__(self, d_model, n_head, block_size, dropout=0.0):
        super().__init__()
        assert d_model % n_head == 0
        self.n_head = n_head
        self.hd = d_model // n_head
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, self.hd)
        self.value = nn.Linear(d_model, self.hd)
        self.proj = nn.Linear(d_model, d_model)
        self.dropout = dropout
        self.register_buffer("causal", torch.tril(torch.ones(block_size, block_size, dtype=torch.bool)))

    def forward(self, x):
        B, T, C = x.shape
        q = self.query(x).view(B, T, self.n_head, self.hd).permute(0, 2, 1, 3)
        k = self.key(x).unsqueeze(1)  # (B, 1, T, hd), broadcast over the heads
        v = self.value(x).unsqueeze(1)
        att = (q @ k.transpose(-2, -1)) * self.hd ** -0.5
        att = att.masked_fill(~self.causal[:T, :T], -10.0)
        att = F.dropout(F.softmax(att, dim=-1), self.dropout, self.training)
        y = (att @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        return self.proj(y)
