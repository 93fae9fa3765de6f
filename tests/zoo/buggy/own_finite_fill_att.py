"""Buggy (student style, finite-fill): the masked scores are filled with -10, "a big negative number", so the
future keeps a weight of about e^-10 and leaks.

Style: separate `W_query` / `W_key` / `W_value`, scores called `att`, a mask buffer of booleans named `causal`.
"""
import math

import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, d_model, num_heads, max_len):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.W_query = nn.Linear(d_model, d_model)
        self.W_key = nn.Linear(d_model, d_model)
        self.W_value = nn.Linear(d_model, d_model)
        self.W_out = nn.Linear(d_model, d_model)
        self.register_buffer("causal", torch.ones(max_len, max_len).triu(1).bool())

    def forward(self, x):
        b, t, d = x.shape
        q = self.W_query(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.W_key(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.W_value(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        att = att.masked_fill(self.causal[:t, :t], -10.0)
        att = torch.softmax(att, dim=-1)
        ctx = torch.matmul(att, v).transpose(1, 2).reshape(b, t, d)
        return self.W_out(ctx)


TARGET = "Attention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "finite-fill"
LINE = 29
