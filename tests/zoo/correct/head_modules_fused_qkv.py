"""Correct: a ModuleList of heads, each with its own fused `qkv = Linear(d, 3 * dh)` split by `chunk(3)`, the heads
concatenated and mixed by one output Linear.

Style: a student's trial (Karpathy's Head/MultiHeadAttention with each head's three projections fused). Each head's
module holds [q_h; k_h; v_h]; the readings once named the whole layer's fused rows inside each head's module
(`heads.0.qkv (rows 12-15)` of a 12-row matrix), empty slices that happened to change nothing.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class OneHead(nn.Module):
    def __init__(self, d_model, head_size):
        super().__init__()
        self.qkv = nn.Linear(d_model, 3 * head_size, bias=False)
        self.head_size = head_size

    def forward(self, x, mask):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        w = q @ k.transpose(-2, -1) * self.head_size ** -0.5
        w = w.masked_fill(mask, float("-inf"))
        return F.softmax(w, dim=-1) @ v


class MultiHead(nn.Module):
    def __init__(self, d_model, n_head, block_size):
        super().__init__()
        assert d_model % n_head == 0
        self.heads = nn.ModuleList([OneHead(d_model, d_model // n_head) for _ in range(n_head)])
        self.mix = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.triu(torch.ones(block_size, block_size), diagonal=1) == 1)

    def forward(self, x):
        T = x.size(1)
        m = self.mask[:T, :T]
        return self.mix(torch.cat([h(x, m) for h in self.heads], dim=-1))


TARGET = "MultiHead"
EXPECT = ()
