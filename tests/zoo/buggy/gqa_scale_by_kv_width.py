"""Buggy (student trial 12): a grouped-query layer, Llama's style (`expand` then `reshape` for the key/value
heads), whose scores are divided by sqrt(n_kv_heads · head_dim), the width of the keys before they are shared, where
the lesson divides by sqrt(head_dim). reference-match fails, and the report names scale-other: the divisor read off
the output is no named scale's, and the trace marks the line with it. The trace had marked it scale-by-dh: its grouped
worked example (d = 8, 4 heads 2 wide, 2 key/value heads) made sqrt(2 · 2) equal to dh = 2; traced with heads 6 wide
it is told as a scale no named mistake has.

Style: `dim, n_heads, n_kv_heads`, an additive -inf buffer, softmax in float32 and back (`type_as`).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "GroupedQueryAttention"
EXPECT = ("gradient-match", "reference-match")
DIAGNOSIS = "scale-other"  # a divisor no named scale has, sqrt(n_kv_heads * head_dim), read off the output
MUST_PASS = ("causal-leakage", "output-shape")
class GroupedQueryAttention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, max_seq_len=256):
        super().__init__()
        assert n_heads % n_kv_heads == 0 and dim % n_heads == 0
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)
        self.register_buffer("bias", torch.full((max_seq_len, max_seq_len), float("-inf")).triu(1))

    def forward(self, x):
        B, L, _ = x.shape
        q = self.wq(x).view(B, L, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, L, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, L, self.n_kv_heads, self.head_dim).transpose(1, 2)
        rep = self.n_heads // self.n_kv_heads
        k = k[:, :, None].expand(B, self.n_kv_heads, rep, L, self.head_dim).reshape(B, self.n_heads, L, self.head_dim)
        v = v[:, :, None].expand(B, self.n_kv_heads, rep, L, self.head_dim).reshape(B, self.n_heads, L, self.head_dim)
        scores = q @ k.transpose(2, 3) / math.sqrt(self.n_kv_heads * self.head_dim)
        scores = scores + self.bias[:L, :L]
        out = F.softmax(scores.float(), dim=-1).type_as(q) @ v
        return self.wo(out.transpose(1, 2).contiguous().view(B, L, -1))
