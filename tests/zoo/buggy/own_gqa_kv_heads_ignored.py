"""Buggy (student style, gqa-kv-heads-ignored): a grouped-query layer that takes `n_kv_heads` and never uses it:
W_k and W_v are built as wide as the queries, every query head gets its own key/value head, and nothing is shared.
The outputs are right attention (plain multi-head attention); only the parameter count shows what is missing.

Style: `n_kv_heads` checked against `n_heads` and then forgotten, W_q / W_k / W_v and an output `proj`, einsum for
the scores and the mixing, `wei` and a `tril` buffer.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, n_kv_heads, max_len):
        super().__init__()
        assert d_model % n_heads == 0 and n_heads % n_kv_heads == 0
        self.n_heads, self.hs = n_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("tril", torch.tril(torch.ones(max_len, max_len)))

    def forward(self, x):
        B, T, C = x.shape
        q = self.W_q(x).view(B, T, self.n_heads, self.hs)
        k = self.W_k(x).view(B, T, self.n_heads, self.hs)
        v = self.W_v(x).view(B, T, self.n_heads, self.hs)
        wei = torch.einsum("bqhd,bkhd->bhqk", q, k) * self.hs ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        out = torch.einsum("bhqk,bkhd->bqhd", wei, v).reshape(B, T, C)
        return self.proj(out)


TARGET = "GroupedQueryAttention"
EXPECT = ("param-count",)
DIAGNOSIS = "gqa-kv-heads-ignored"
LINE = 19  # the keys' projection, as wide as the queries'; the values' (20) is marked too
