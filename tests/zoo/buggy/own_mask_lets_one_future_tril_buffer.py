"""Buggy (student style, mask-lets-one-future): nanoGPT's `tril` buffer built with torch.tril(..., diagonal=1) on the
register_buffer line, one diagonal too many: every token also sees the next one.  A student's trial: `trace` told them
to use torch.triu(..., diagonal=1) while the report's fix kept their tril (diagonal=0); both now say tril.

Style: a fused `qkv` split with .split(C, dim=2), the scores `att`, an output `proj`, `self.tril[:T, :T] == 0`.
"""
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size), diagonal=1))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        k = k.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        v = v.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        att = att.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        att = att.softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


TARGET = "CausalSelfAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-lets-one-future"
LINE = 20  # the register_buffer line that builds the tril, not the masked_fill in forward
