"""Buggy (student style, mqa-expand-not-repeat): a layer with `n_kv_heads` key/value heads shares them with
`.expand`, the multi-query idiom: one key/value head broadcasts to every query head, but with 2 key/value heads for
4 query heads expand raises, since only an axis of size 1 can stretch.

Style: Llama-like `wq` / `wk` / `wv` / `wo`, `head_dim`, `n_kv_heads`, scores `scores`, a float -inf mask buffer
added to the scores.
"""
import math

import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, max_seq_len):
        super().__init__()
        assert dim % n_heads == 0 and n_heads % n_kv_heads == 0
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim)
        self.register_buffer("mask", torch.full((max_seq_len, max_seq_len), float("-inf")).triu(1))

    def forward(self, x):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim).transpose(1, 2)
        xk = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        xv = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim).transpose(1, 2)
        keys = xk.expand(bsz, self.n_heads, seqlen, self.head_dim)
        values = xv.expand(bsz, self.n_heads, seqlen, self.head_dim)
        scores = xq @ keys.transpose(2, 3) / math.sqrt(self.head_dim)
        scores = torch.softmax(scores + self.mask[:seqlen, :seqlen], dim=-1)
        out = (scores @ values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(out)


TARGET = "Attention"
EXPECT = ("output-shape",)
DIAGNOSIS = "mqa-expand-not-repeat"
LINE = 30
