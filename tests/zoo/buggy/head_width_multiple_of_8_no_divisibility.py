"""Buggy: a guard on the head width only (a multiple of 8), none on divisibility: with 3 heads and embed_dim = 26
it builds heads of width 26 // 3 = 8 that cover 24 of the 26 features.

Style: the correct zoo layer head_width_multiple_of_8.py without its divisibility guard.  mha-check builds it with
heads of width 8 (it refuses narrower ones by design), and the divisibility check builds the indivisible widths with
heads that wide (26 with 3 heads, 34 with 4): only there does the missing guard show.  For divisible widths the
layer is correct, so every other check passes and the lesson rule is the root cause.
"""
import torch
import torch.nn as nn


class HeadWidthOnlyGuard(nn.Module):
    def __init__(self, embed_dim, num_heads, max_len):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        assert self.head_dim % 8 == 0, f"head_dim={self.head_dim} must be a multiple of 8"
        inner = num_heads * self.head_dim
        self.q_proj = nn.Linear(embed_dim, inner, bias=False)
        self.k_proj = nn.Linear(embed_dim, inner, bias=False)
        self.v_proj = nn.Linear(embed_dim, inner, bias=False)
        self.out_proj = nn.Linear(inner, embed_dim)
        self.register_buffer("mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        B, T, _ = x.shape
        split = lambda t: t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, dh)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        scores = q @ k.transpose(-2, -1) / self.head_dim ** 0.5
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        out = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, -1)
        return self.out_proj(out)


TARGET = "HeadWidthOnlyGuard"
EXPECT = ("divisibility",)
DIAGNOSIS = "no-divisibility-check"
