"""Buggy: the heads are split with view(B, n, H, dh) but never transposed to (B, H, n, dh), and merged back
without a transpose either: scores come out (B, n, H, H), and masking them with an (n, n) mask raises.

Style: a beginner's first try after reading nanoGPT, from a user trial: q, k, v views with T and C names, the mask
made in forward. The forward raises on a shape mismatch whose small size is the number of heads; that once read as
"a mask of a fixed size" (mask-size-fixed). No mutant is exactly this mistake, so the right diagnosis is none and
output-shape must fail with the error and the line.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class HeadsNeverTransposed(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads):
        super().__init__()
        assert d_out % num_heads == 0
        self.n_heads, self.head_size = num_heads, d_out // num_heads
        self.q = nn.Linear(d_in, d_out)
        self.k = nn.Linear(d_in, d_out)
        self.v = nn.Linear(d_in, d_out)
        self.proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        B, T, _ = x.shape
        C = self.n_heads * self.head_size
        q = self.q(x).view(B, T, self.n_heads, self.head_size)
        k = self.k(x).view(B, T, self.n_heads, self.head_size)
        v = self.v(x).view(B, T, self.n_heads, self.head_size)
        att = q @ k.transpose(-2, -1) / self.head_size ** 0.5
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), 1)
        att = att.masked_fill(mask, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.contiguous().view(B, T, C))


TARGET = "HeadsNeverTransposed"
EXPECT = ("output-shape",)
DIAGNOSIS = None
UNNAMED_OK = True  # no mutant is this mistake: naming none is right, naming mask-size-fixed was wrong
