"""Buggy (student style, mask-added): a "keep" mask of 1s and 0s (1 where a token may look) is added to the scores, as
if it were an additive mask: the past's scores grow by 1, the future's stay as they are, and nothing is hidden.

Style: one fused `qkv` projection split with chunk, einsum for the scores, scores called `scores`, a float mask
buffer named `keep`, output projection `out_proj`.
"""
import math

import torch
import torch.nn as nn


class SelfAttention(nn.Module):
    def __init__(self, dim, heads, max_seq_len):
        super().__init__()
        if dim % heads:
            raise ValueError("dim must be divisible by heads")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out_proj = nn.Linear(dim, dim)
        self.register_buffer("keep", torch.tril(torch.ones(max_seq_len, max_seq_len)))

    def forward(self, x):
        b, n, dim = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, n, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(dim // self.heads)
        scores = scores + self.keep[:n, :n]
        attn = scores.softmax(dim=-1)
        out = torch.einsum("bhij,bhjd->bhid", attn, v)
        return self.out_proj(out.transpose(1, 2).reshape(b, n, dim))


TARGET = "SelfAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-added"
LINE = 28
