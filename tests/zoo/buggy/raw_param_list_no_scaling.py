"""Buggy (no scaling): the scores are never divided by sqrt(head width), so the softmax is too peaked.

Style: the four weight matrices kept in an `nn.ParameterList` `mats` ([W_q, W_k, W_v, W_o], each (d_in, d_out)) and
used as `x @ W`, a separate output bias `out_bias`, a boolean hide-mask buffer filled with -math.inf. No name says a
role, and there is no nn.Linear. From a student trial (issue 28): no reading of the parameters existed, so every
weight check could not tell and this bug ended with zero failing checks.
"""
import math

import torch
import torch.nn as nn


class PLAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        std = 1 / math.sqrt(d_model)
        self.mats = nn.ParameterList([nn.Parameter(torch.randn(d_model, d_model) * std) for _ in range(4)])
        self.out_bias = nn.Parameter(torch.zeros(d_model))
        self.register_buffer("hide", torch.ones(max_len, max_len).triu(1).bool())

    def forward(self, x):
        B, T, D = x.shape
        dh = D // self.n_heads
        q, k, v = ((x @ W).view(B, T, self.n_heads, dh).transpose(1, 2) for W in self.mats[:3])
        s = q @ k.transpose(-2, -1)
        p = s.masked_fill(self.hide[:T, :T], -math.inf).softmax(-1)
        y = (p @ v).transpose(1, 2).reshape(B, T, D)
        return y @ self.mats[3] + self.out_bias


TARGET = "PLAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "no-scaling"
LINE = 28
