"""Buggy (student style, split-view-order-values): the queries and keys are split with unflatten and transpose,
the values with a reshape straight to (B, H, T, hs), so each value "head" is a block of consecutive features of
several tokens: the weights are right but they average scrambled values, and later tokens leak in.

Style: a fused `c_attn` unpacked with chunk, `hs`, `att`, `F.softmax`, an output `c_proj`, a boolean `causal` buffer.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head, self.hs = n_head, n_embd // n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("causal", torch.triu(torch.ones(block_size, block_size, dtype=torch.bool), 1))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).chunk(3, dim=-1)
        q = q.unflatten(-1, (self.n_head, self.hs)).transpose(1, 2)
        k = k.unflatten(-1, (self.n_head, self.hs)).transpose(1, 2)
        v = v.reshape(B, self.n_head, T, self.hs)
        att = (q @ k.transpose(-2, -1)) * self.hs ** -0.5
        att = F.softmax(att.masked_fill(self.causal[:T, :T], float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.c_proj(y)


TARGET = "SelfAttention"
EXPECT = ("reference-match", "gradient-match", "causal-leakage", "view-order")
DIAGNOSIS = "split-view-order-values"
LINE = 26
