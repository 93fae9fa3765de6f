"""One fused 4-D parameter for the three projections, heads axis first: qkv of shape (H, 3, d, dh) used as
einsum('btd,hsde->sbhte', x, qkv) and unbound along its role axis, the heads merged by a reshape and mixed by an
nn.Linear output projection (a student's trial, issue 28: "readings decided by evidence")."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class HeadsFirstFused(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        assert d_out % num_heads == 0
        self.num_heads, self.head_dim = num_heads, d_out // num_heads
        self.qkv = nn.Parameter(torch.randn(num_heads, 3, d_in, self.head_dim) * d_in ** -0.5)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = torch.einsum("btd,hsde->sbhte", x, self.qkv).unbind(0)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(self.mask[:t, :t] == 0, float("-inf"))
        context = F.softmax(scores, dim=-1) @ v
        return self.out_proj(context.transpose(1, 2).reshape(b, t, self.num_heads * self.head_dim))


TARGET = "HeadsFirstFused"
EXPECT = ()
