"""Buggy (student style, view-without-contiguous): the heads are merged with transpose(1, 2).view(B, T, C); after a
transpose the tensor is not contiguous, so .view raises.

Style: `query` / `key` / `value` and an output `out`, scores `att`, a float mask buffer of -inf above the diagonal
added to the scores.
"""
import math

import torch
import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, dim, n_heads, ctx_len):
        super().__init__()
        assert dim % n_heads == 0
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.triu(torch.ones(ctx_len, ctx_len, dtype=torch.bool), 1))

    def forward(self, x):
        B, T, C = x.shape
        q = self.query(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.key(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        att = torch.softmax(att.masked_fill(self.mask[:T, :T], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).view(B, T, C)
        return self.out(y)


TARGET = "Attn"
EXPECT = ("contiguity",)
DIAGNOSIS = "view-without-contiguous"
LINE = 31
