"""Buggy (a lesson rule, student style, additive-mask-1e9): the future is hidden by adding torch.where(mask, -1e9,
0) to the scores, the annotated transformer's habit, instead of filling with -inf: exact at every realistic
magnitude, but scores past 1e9 get through and -1e9 does not fit in half precision.

Style: `to_q` / `to_k` / `to_v` / `to_out`, scores `att`, a boolean `causal` buffer.
"""
import math

import torch
import torch.nn as nn


class AnnotatedAttention(nn.Module):
    def __init__(self, dim, heads, context):
        super().__init__()
        assert dim % heads == 0
        self.heads, self.hd = heads, dim // heads
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)
        self.to_out = nn.Linear(dim, dim)
        self.register_buffer("causal", torch.triu(torch.ones(context, context, dtype=torch.bool), 1))

    def forward(self, x):
        B, T, D = x.shape
        q = self.to_q(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        k = self.to_k(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        v = self.to_v(x).view(B, T, self.heads, self.hd).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(self.hd)
        att = att + torch.where(self.causal[:T, :T], -1e9, 0.0)
        att = att.softmax(dim=-1)
        return self.to_out((att @ v).transpose(1, 2).reshape(B, T, D))


TARGET = "AnnotatedAttention"
EXPECT = ("mask-fill",)
DIAGNOSIS = "additive-mask-1e9"
LINE = 30
