"""Correct: one big Q/K/V projection each, then an explicit Python loop over heads using feature slices.

Style: a beginner who understands "head h uses features h*dh:(h+1)*dh" and writes exactly that, no reshapes:
a for loop, per-head slices of q/k/v, torch.cat of the head outputs along the feature axis. Names query / key /
value / output, separate d_in and d_out, an additive float mask buffer (-inf above the diagonal, 0 elsewhere)
added to the scores, dropout via nn.Dropout on each head's weights. Divisibility raises ValueError.
"""
import math

import torch
import torch.nn as nn


class LoopMultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, n_heads, ctx_len, dropout=0.0, qkv_bias=False):
        super().__init__()
        if d_out % n_heads != 0:
            raise ValueError("d_out has to be divisible by n_heads")
        self.n_heads = n_heads
        self.head_size = d_out // n_heads

        self.query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.output = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)

        additive = torch.full((ctx_len, ctx_len), float("-inf")).triu(1)  # 0 on and below the diagonal
        self.register_buffer("causal_bias", additive)

    def forward(self, x):
        n = x.shape[1]
        Q, K, V = self.query(x), self.key(x), self.value(x)

        outputs = []
        for h in range(self.n_heads):
            cols = slice(h * self.head_size, (h + 1) * self.head_size)
            q, k, v = Q[:, :, cols], K[:, :, cols], V[:, :, cols]
            scores = q @ k.transpose(1, 2) / math.sqrt(self.head_size)
            scores = scores + self.causal_bias[:n, :n]
            weights = self.dropout(torch.softmax(scores, dim=-1))
            outputs.append(weights @ v)

        return self.output(torch.cat(outputs, dim=-1))


TARGET = "LoopMultiHeadAttention"
EXPECT = ()
