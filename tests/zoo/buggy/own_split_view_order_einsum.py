"""Buggy (student style, split-view-order): each projection is cut into heads with view(B, H, T, hd) straight from
(B, T, D), so a head's "tokens" are slices across several tokens' features.

Style: `W_q` / `W_k` / `W_v` / `W_o`, scores by einsum, the weights `att`.
"""
import torch
import torch.nn as nn


class EinsumMHA(nn.Module):
    def __init__(self, d_model, n_heads, max_seq_len):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.hd = n_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.triu(torch.ones(max_seq_len, max_seq_len), 1).bool())

    def forward(self, x):
        B, T, D = x.shape
        q = self.W_q(x).view(B, self.n_heads, T, self.hd)
        k = self.W_k(x).view(B, self.n_heads, T, self.hd)
        v = self.W_v(x).view(B, self.n_heads, T, self.hd)
        att = torch.einsum("bhqd,bhkd->bhqk", q, k) / self.hd ** 0.5
        att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        out = torch.einsum("bhqk,bhkd->bhqd", att, v)
        return self.W_o(out.transpose(1, 2).reshape(B, T, D))


TARGET = "EinsumMHA"
EXPECT = ("view-order", "reference-match")
DIAGNOSIS = "split-view-order"
LINE = 23
