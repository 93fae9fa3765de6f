"""Buggy (student style, mask-hides-diagonal): the mask buffer is torch.triu(ones) with the default diagonal=0, so
it hides each token from itself too; the first token then sees nothing (a row of -inf: NaN).

Style: `W_q` / `W_k` / `W_v` / `W_o`, scores `scores` by einsum, a boolean buffer `mask`.
"""
import math

import torch
import torch.nn as nn


class EinsumAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_seq_len):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.triu(torch.ones(max_seq_len, max_seq_len)).bool())

    def forward(self, x):
        B, T, D = x.shape
        q = self.W_q(x).view(B, T, self.n_heads, self.d_head)
        k = self.W_k(x).view(B, T, self.n_heads, self.d_head)
        v = self.W_v(x).view(B, T, self.n_heads, self.d_head)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(self.d_head)
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return self.W_o(torch.einsum("bhqk,bkhd->bqhd", weights, v).reshape(B, T, D))


TARGET = "EinsumAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-hides-diagonal"
LINE = 21  # the buffer built with triu(ones) (diagonal 0), not the masked_fill (29) that uses it
