"""Buggy (a student's trial, 2026-12-05): the mask hides the past, not the future: `tril(ones, diagonal=-1)` used as
"1 where we mask", so each token sees itself and every later one.  Its leak pattern is that of a True = masked mask
handed to scaled_dot_product_attention (sdpa-bool-mask), which this layer never calls: it was named so, and told to
pass `~mask`.  Then no mutant was exactly this mistake and none was named, under a causal-leakage that said "the
mask is inverted" (an instructor's trial read that as a contradiction); it is mask-hides-past since 2026-12-06.

Style: a fused W_qkv split with view(b, n, 3, H, dh).unbind(2), masked_fill with -inf, reshape to merge.
"""
import torch
import torch.nn as nn


class CausalMHAOnes(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        # 1 where we mask
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length), diagonal=-1))

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.W_qkv(x).view(b, n, 3, self.num_heads, self.head_dim).unbind(2)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        s = q @ k.transpose(-2, -1) / self.head_dim ** 0.5
        s = s.masked_fill(self.mask[:n, :n].bool(), float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).reshape(b, n, self.d_out))


TARGET = "CausalMHAOnes"
EXPECT = ("causal-leakage",)
DIAGNOSIS = "mask-hides-past"
