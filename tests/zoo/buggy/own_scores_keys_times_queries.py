"""Buggy (a student's trial, trials/21 f07): the scores are `k @ q.transpose(-2, -1)`, the keys times the
queries, every score the transposed one; the projections themselves are right (per-head Parameters (H, d, dh) used as
`x.unsqueeze(1) @ W`).  The product is the line to change: the trial was sent to `q = xh @ self.W_q`."""
import torch
import torch.nn as nn


class StackedParamAttention(nn.Module):
    """One (dim, head_dim) matrix per head and role, stacked: W_q[h] is head h's query matrix."""

    def __init__(self, dim, heads, max_len):
        super().__init__()
        assert dim % heads == 0
        dh = dim // heads
        self.dh = dh
        self.W_q = nn.Parameter(torch.randn(heads, dim, dh) / dim ** 0.5)
        self.W_k = nn.Parameter(torch.randn(heads, dim, dh) / dim ** 0.5)
        self.W_v = nn.Parameter(torch.randn(heads, dim, dh) / dim ** 0.5)
        self.W_o = nn.Parameter(torch.randn(dim, dim) / dim ** 0.5)
        self.b_o = nn.Parameter(torch.zeros(dim))
        self.register_buffer("tri", torch.ones(max_len, max_len).tril())

    def forward(self, x):
        B, n, dim = x.shape
        xh = x.unsqueeze(1)  # (B, 1, n, dim) broadcasts over the heads
        q = xh @ self.W_q  # (B, H, n, dh)
        k = xh @ self.W_k
        v = xh @ self.W_v
        scores = (k @ q.transpose(-2, -1)) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.tri[:n, :n] == 0, float("-inf"))
        attn = scores.softmax(-1)
        heads = attn @ v  # (B, H, n, dh)
        concat = heads.transpose(1, 2).flatten(2)  # (B, n, H*dh)
        return concat @ self.W_o + self.b_o


TARGET = "StackedParamAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "swapped-q-k"
LINE = 29
