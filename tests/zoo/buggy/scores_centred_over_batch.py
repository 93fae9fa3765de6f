"""Buggy (scores centred over the batch axis): `s = s - s.mean(dim=0, keepdim=True)`, meant as a centring of each
row of scores, taken over the sequences of the batch instead, so every sequence's attention depends on the others.

Style: the lesson's MultiHeadAttention names, `masked_fill_` on a float triu buffer made bool, the scale after the
fill (a student's trial, issue 28). batch-independence fails ("batch mixed"), which is also the pattern of a merge
with transpose(0, 2); the layer merges rightly, and batch-seq-swap's own numbers (its variant, under the mapped
weights) are not its outputs, so that mistake is not named (it was, by its pattern alone). No catalogued mistake is
a mean over the batch: none named.
"""
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, n, _ = x.shape
        q = self.W_query(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.W_key(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.W_value(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        s = q @ k.transpose(2, 3)
        s = s - s.mean(dim=0, keepdim=True)  # "centre" the scores: over the batch axis, by mistake
        s.masked_fill_(self.mask.bool()[:n, :n], -torch.inf)
        w = self.dropout(torch.softmax(s / self.head_dim ** 0.5, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(b, n, self.d_out))


TARGET = "MultiHeadAttention"
EXPECT = ("batch-independence", "reference-match")
DIAGNOSIS = None  # never batch-seq-swap: the numbers refute it
