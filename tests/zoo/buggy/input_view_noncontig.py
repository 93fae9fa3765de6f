"""Buggy: the input is flattened with `x.view(-1, d_in)`, which raises on a non-contiguous input.

Style: raw (d_in, d_out) parameter matrices used as 2-D matmuls on a flattened token axis ("one GEMM for the
whole batch"), bias on the output projection only, mask built in forward on x.device. Everything is correct for a
contiguous input; an input such as torch.randn(T, B, d).transpose(0, 1) makes `x.view(-1, d_in)` fail.
(x[..., ::2]-style inputs, whose last dimension is strided, still view fine.)
"""
import math

import torch
import torch.nn as nn


class FlatAttention(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length, dropout=0.0):
        super().__init__()
        assert d_out % num_heads == 0
        self.h = num_heads
        self.dh = d_out // num_heads
        self.d_in, self.d_out = d_in, d_out
        self.W_q = nn.Parameter(torch.randn(d_in, d_out) / math.sqrt(d_in))
        self.W_k = nn.Parameter(torch.randn(d_in, d_out) / math.sqrt(d_in))
        self.W_v = nn.Parameter(torch.randn(d_in, d_out) / math.sqrt(d_in))
        self.W_o = nn.Parameter(torch.randn(d_out, d_out) / math.sqrt(d_out))
        self.b_o = nn.Parameter(torch.zeros(d_out))
        self.drop = nn.Dropout(dropout)
        self.context_length = context_length

    def forward(self, x):
        B, T, _ = x.shape
        flat = x.view(-1, self.d_in)  # (B*T, d_in)
        q = (flat @ self.W_q).view(B, T, self.h, self.dh).transpose(1, 2)
        k = (flat @ self.W_k).view(B, T, self.h, self.dh).transpose(1, 2)
        v = (flat @ self.W_v).view(B, T, self.h, self.dh).transpose(1, 2)

        s = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
        s = s.masked_fill(torch.triu(torch.ones(T, T, device=x.device), 1).bool(), float("-inf"))
        p = self.drop(torch.softmax(s, dim=-1))

        ctx = (p @ v).transpose(1, 2).reshape(B * T, self.d_out)
        return (ctx @ self.W_o + self.b_o).view(B, T, self.d_out)


TARGET = "FlatAttention"
EXPECT = ("contiguity",)
DIAGNOSIS = "view-without-contiguous"  # the closest mutant
UNNAMED_OK = True  # view() on the input itself: no mutant has exactly this mistake, so naming none is right too
