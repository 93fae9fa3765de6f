"""Buggy (student style, split-strided): every projection is split with view(B, T, hd, nh).permute(0, 3, 1, 2), so
head h takes features h, h + nh, h + 2·nh, ..., but the heads are merged back the lesson's way
(transpose(1, 2).contiguous().view(B, T, C)), which puts head h's outputs in the block h·hd .. (h + 1)·hd: the
features do not go back where they came from.

Style: a student's own names (`to_q`, `to_k`, `to_v`, `to_out`), a helper method for the split, `tril` mask.
"""
import math

import torch
import torch.nn as nn


class SelfAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.to_q = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.to_k = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.to_v = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.to_out = nn.Linear(d_out, d_out)
        self.register_buffer("tril", torch.tril(torch.ones(context_length, context_length)))

    def split_heads(self, t):
        B, T, _ = t.shape
        return t.view(B, T, self.head_dim, self.num_heads).permute(0, 3, 1, 2)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.split_heads(self.to_q(x))
        k = self.split_heads(self.to_k(x))
        v = self.split_heads(self.to_v(x))
        scores = q @ k.transpose(2, 3) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        out = out.transpose(1, 2).contiguous().view(B, T, self.num_heads * self.head_dim)
        return self.to_out(out)


TARGET = "SelfAttention"
EXPECT = ("view-order", "reference-match")
DIAGNOSIS = "split-strided"
LINE = 28
