"""Buggy (student style, softmax-wrong-axis): the softmax normalises over dim=-2, the queries, not over the keys.

Style: `Wq` / `Wk` / `Wv` / `Wo`, the scores `att`, a mask buffer `mask` of 0/1 floats compared with 0.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, context_length):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.h, self.d_head = num_heads, embed_dim // num_heads
        self.Wq = nn.Linear(embed_dim, embed_dim)
        self.Wk = nn.Linear(embed_dim, embed_dim)
        self.Wv = nn.Linear(embed_dim, embed_dim)
        self.Wo = nn.Linear(embed_dim, embed_dim)
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        B, T, E = x.shape
        q = self.Wq(x).view(B, T, self.h, self.d_head).transpose(1, 2)
        k = self.Wk(x).view(B, T, self.h, self.d_head).transpose(1, 2)
        v = self.Wv(x).view(B, T, self.h, self.d_head).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
        att = att.masked_fill(self.mask[:T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-2)
        return self.Wo((att @ v).transpose(1, 2).reshape(B, T, E))


TARGET = "CausalAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "softmax-wrong-axis"
LINE = 30
