"""Buggy (student style, mask-lets-one-future): the hidden positions built with torch.triu(..., diagonal=2) in
__init__, one diagonal too far: every token also sees the next one.  The trace and the report both keep the student's
triu (diagonal=1).

Style: separate `W_q` / `W_k` / `W_v` / `W_o`, a boolean `mask` buffer (True = hidden), `scores`, `w`.
"""
import math

import torch
import torch.nn as nn

class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.triu(torch.ones(block_size, block_size), diagonal=2).bool())

    def forward(self, x):
        B, T, C = x.shape
        h = self.n_heads
        q = self.W_q(x).view(B, T, h, C // h).transpose(1, 2)
        k = self.W_k(x).view(B, T, h, C // h).transpose(1, 2)
        v = self.W_v(x).view(B, T, h, C // h).transpose(1, 2)
        scores = q @ k.transpose(2, 3) / math.sqrt(C // h)
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        out = (w @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.W_o(out)


TARGET = "CausalSelfAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-lets-one-future"
LINE = 21
