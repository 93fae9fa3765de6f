"""Buggy: the softmax is written by hand, and the row maximum it subtracts for stability is taken over the whole row
of scores before the mask zeroes the future: exp(s - s.amax(-1)) * keep / sum.  Mathematically the maximum cancels,
so the outputs are the reference's; numerically the future's score is in it, so a future score far above the past
ones (about 100 in float32, 17 in float16) underflows every allowed weight to 0 and the row to 0/0, NaN, and in
float64 the future reaches the past by rounding (a gradient of about 1e-16).  No catalogued mistake: there is no
fill at all, so no fill value is the line to change.

Style: fused qkv viewed (B, T, 3, H, hd) and permuted, a 0/1 `keep` buffer multiplied into the exponentials.  From a
student's trial (trial6): the report named the finite-fill mistake ("fill the masked scores with float('-inf')")
from the small leak's pattern alone, though the layer fills nothing; the trace marks the exponential's line instead.
"""
import math

import torch
import torch.nn as nn


class HandSoftmaxAttention(nn.Module):
    def __init__(self, d_model, n_heads, block_size=128):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.hd = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("keep", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.hd).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.hd)
        e = torch.exp(s - s.amax(dim=-1, keepdim=True)) * self.keep[:T, :T]
        p = e / e.sum(dim=-1, keepdim=True)
        return self.proj((p @ v).transpose(1, 2).reshape(B, T, C))


TARGET = "HandSoftmaxAttention"
EXPECT = ("causal-leakage",)
DIAGNOSIS = None
LINE = 31  # the line `mha-check trace` marks (exp-before-mask) and the report points to
