"""Correct: Q, K and V kept in one nn.ModuleList named qkv (three Linear layers, not a fused one), einsum scores, a
boolean tril buffer inverted in forward, permute instead of transpose.  From an instructor trial: with three heads the
list also reads as three heads of a fused q/k/v, and reference-match failed the correct layer (17 of 21 points);
the reading proven on the base configuration must be the one used on every configuration.
"""
import math
import torch
import torch.nn as nn


class MyAttn(nn.Module):
    def __init__(self, embed_dim, num_heads, context_length, dropout=0.0):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.h = num_heads
        self.qkv = nn.ModuleList([nn.Linear(embed_dim, embed_dim) for _ in range(3)])
        self.proj = nn.Linear(embed_dim, embed_dim)
        self.register_buffer("tril", torch.tril(torch.ones(context_length, context_length, dtype=torch.bool)))

    def forward(self, x):
        B, n, d = x.shape
        q, k, v = [l(x).reshape(B, n, self.h, d // self.h).permute(0, 2, 1, 3) for l in self.qkv]
        s = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(d // self.h)
        w = s.masked_fill(~self.tril[:n, :n], float("-inf")).softmax(-1)
        out = w @ v
        return self.proj(out.permute(0, 2, 1, 3).reshape(B, n, d))


TARGET = "MyAttn"
EXPECT = ()
