"""Buggy: `.transpose(1, 2).view(B, T, C)` on the head outputs without `.contiguous()`.

Style: compact matmul code with separate q/k/v/o Linear layers (names wq, wk, wv, wo) and a bool mask buffer.
After the transpose the tensor is not contiguous, so `view` raises a RuntimeError for any input with more than one
token and more than one head. (It "worked" in the author's single-head smoke test.)
"""
import math

import torch
import torch.nn as nn


class MHA(nn.Module):
    def __init__(self, d_model, n_heads, max_len, dropout=0.0):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.wq = nn.Linear(d_model, d_model, bias=False)
        self.wk = nn.Linear(d_model, d_model, bias=False)
        self.wv = nn.Linear(d_model, d_model, bias=False)
        self.wo = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("future", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, C = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.d_k)
        att = att.masked_fill(self.future[:T, :T], float("-inf"))
        att = self.drop(att.softmax(-1))
        out = (att @ v).transpose(1, 2).view(B, T, C)
        return self.wo(out)


TARGET = "MHA"
EXPECT = ("contiguity",)
DIAGNOSIS = "view-without-contiguous"  # the mutant this mistake should be diagnosed as
