"""Buggy (student style, scale-other): the scores divided by 3.0, a number typed in, where sqrt of the head width
belongs.  Before scale-other the report said "cannot tell" for every weight check and "nothing it could check is
wrong": no reading of the raw matrices reproduced the output, so none was proven, while trace marked a scale no
mistake had.  Now the divisor is read off the output, which proves the reading, and the line is named.

Style: raw nn.Parameter matrices used through einsum ("btd,de->bte", x @ W), heads kept on the third axis until the
scores ("bqhd,bkhd->bhqk"), a boolean keep-mask `causal`, names embed_dim / n_heads / max_len / p.
"""
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, embed_dim, n_heads, max_len=64, p=0.1):
        super().__init__()
        if embed_dim % n_heads != 0:
            raise ValueError("embed_dim must be divisible by n_heads")
        self.h = n_heads
        self.wq = nn.Parameter(torch.randn(embed_dim, embed_dim) / math.sqrt(embed_dim))
        self.wk = nn.Parameter(torch.randn(embed_dim, embed_dim) / math.sqrt(embed_dim))
        self.wv = nn.Parameter(torch.randn(embed_dim, embed_dim) / math.sqrt(embed_dim))
        self.wo = nn.Linear(embed_dim, embed_dim)
        self.drop = nn.Dropout(p)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x):
        B, T, D = x.shape
        hd = D // self.h
        q = torch.einsum("btd,de->bte", x, self.wq).reshape(B, T, self.h, hd)
        k = torch.einsum("btd,de->bte", x, self.wk).reshape(B, T, self.h, hd)
        v = torch.einsum("btd,de->bte", x, self.wv).reshape(B, T, self.h, hd)
        att = torch.einsum("bqhd,bkhd->bhqk", q, k) / 3.0
        att = att.masked_fill(~self.causal[:T, :T], float("-inf"))
        att = self.drop(att.softmax(-1))
        y = torch.einsum("bhqk,bkhd->bqhd", att, v).reshape(B, T, D)
        return self.wo(y)


TARGET = "CausalSelfAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-other"
LINE = 34  # the division by 3.0
