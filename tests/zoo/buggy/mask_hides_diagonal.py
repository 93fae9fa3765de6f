"""Buggy: the mask also hides the diagonal (tril(..., diagonal=-1)): a token may not attend to itself.

Style: einsum over (B, T, H, D) tensors with separate Linear projections (q_lin / k_lin / v_lin / o_lin) and a
"strictly earlier tokens" bool buffer. The author reasoned that a token should only look at the *past*. Token 0
then has no allowed key at all: its row is all -inf and softmax returns NaN, which flows into every output
feature of position 0. (Positions t >= 1 are finite but ignore their own value vector.)
"""
import math

import torch
import torch.nn as nn


class PastOnlyAttention(nn.Module):
    def __init__(self, dim, heads, max_len, dropout=0.0):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.head_dim = dim // heads
        self.q_lin = nn.Linear(dim, dim, bias=False)
        self.k_lin = nn.Linear(dim, dim, bias=False)
        self.v_lin = nn.Linear(dim, dim, bias=False)
        self.o_lin = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("past", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=-1))

    def forward(self, x):
        B, T, D = x.shape
        q = self.q_lin(x).view(B, T, self.heads, self.head_dim)
        k = self.k_lin(x).view(B, T, self.heads, self.head_dim)
        v = self.v_lin(x).view(B, T, self.heads, self.head_dim)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~self.past[:T, :T], float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        out = torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(B, T, D)
        return self.o_lin(out)


TARGET = "PastOnlyAttention"
EXPECT = ("output-shape", "reference-match")
DIAGNOSIS = "mask-hides-diagonal"  # the mutant this mistake should be diagnosed as
