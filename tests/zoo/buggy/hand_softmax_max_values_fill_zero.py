"""Buggy: a softmax by hand whose row maximum (torch.max(...).values) is taken over every key, the future's too,
before the future's exponentials are zeroed with masked_fill(..., 0.0): a future score far above the past ones
underflows the allowed weights to 0 (0/0, NaN), and in float64 the future reaches the past by rounding.  No catalogued
mistake (the fill of 0 is on the exponentials, after the maximum, where 0 is right).

Style: per-projection Linear layers, einsum scores, a boolean `future` buffer.  From a student's trial (trial6), the
variant of `hand_softmax_row_max_sees_future.py` with max(...).values and a fill of the exponentials.
"""
import torch
import torch.nn as nn


class ManualSoftmaxMHA(nn.Module):
    def __init__(self, embed_dim, num_heads, max_len=64):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.h, self.dk = num_heads, embed_dim // num_heads
        self.to_q = nn.Linear(embed_dim, embed_dim)
        self.to_k = nn.Linear(embed_dim, embed_dim)
        self.to_v = nn.Linear(embed_dim, embed_dim)
        self.to_out = nn.Linear(embed_dim, embed_dim)
        self.register_buffer("future", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = (f(x).view(b, n, self.h, self.dk).transpose(1, 2) for f in (self.to_q, self.to_k, self.to_v))
        logits = torch.einsum("bhid,bhjd->bhij", q, k) * self.dk ** -0.5
        top = torch.max(logits, dim=-1, keepdim=True).values
        num = torch.exp(logits - top).masked_fill(self.future[:n, :n], 0.0)
        attn = num / num.sum(-1, keepdim=True)
        return self.to_out(torch.einsum("bhij,bhjd->bhid", attn, v).transpose(1, 2).reshape(b, n, d))


TARGET = "ManualSoftmaxMHA"
EXPECT = ("causal-leakage",)
DIAGNOSIS = None
LINE = 29  # the line `mha-check trace` marks (exp-before-mask) and the report points to
