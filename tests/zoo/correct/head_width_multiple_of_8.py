"""Correct: the lesson's layer with a guard of its own on the head width, which must be a multiple of 8 (as kernels
that tile heads in blocks of 8 demand, and as fkodom's MultiheadGQA asserts).

Style: a student's layer with `embed_dim`, `num_heads`, `max_len`, separate q_proj/k_proj/v_proj/out_proj, a
divisibility guard (ValueError) and a second guard `head_dim % 8 == 0`.  mha-check's own configurations have heads of
width 2 and 4, which this class refuses by design: that is mha-check's input, not the student's mistake.  It must
pass every check, run at head widths it accepts (8, keeping the heads), and never be told it inverted its
divisibility check (it refuses an indivisible width too).
"""
import torch
import torch.nn as nn


class HeadWidthMultipleOf8(nn.Module):
    def __init__(self, embed_dim, num_heads, max_len):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim={embed_dim} is not divisible by num_heads={num_heads}")
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        assert self.head_dim % 8 == 0, f"head_dim={self.head_dim} must be a multiple of 8"
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.register_buffer("mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        B, T, D = x.shape
        split = lambda t: t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)  # (B, H, T, dh)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        scores = q @ k.transpose(-2, -1) / self.head_dim ** 0.5
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = (weights @ v).transpose(1, 2).contiguous().view(B, T, D)
        return self.out_proj(out)


TARGET = "HeadWidthMultipleOf8"
EXPECT = ()
