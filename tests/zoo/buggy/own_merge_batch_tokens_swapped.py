"""Buggy (student style, batch-seq-swap): the heads are merged with `transpose(0, 2)` instead of `transpose(1, 2)`,
which swaps the batch and the tokens: every shape fits and a batch of one sequence is right, but with several
sequences each output row is assembled from other sequences' tokens.

Style: `to_q` / `to_k` / `to_v` / `to_out`, `scale` kept as an attribute, `attn`, the merge by reshape.
"""
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, heads, max_seq_len):
        super().__init__()
        assert dim % heads == 0
        self.heads, self.dim_head = heads, dim // heads
        self.scale = self.dim_head ** -0.5
        self.to_q = nn.Linear(dim, dim)
        self.to_k = nn.Linear(dim, dim)
        self.to_v = nn.Linear(dim, dim)
        self.to_out = nn.Linear(dim, dim)
        self.register_buffer("causal", torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        b, n, dim = x.shape
        q = self.to_q(x).view(b, n, self.heads, self.dim_head).transpose(1, 2)
        k = self.to_k(x).view(b, n, self.heads, self.dim_head).transpose(1, 2)
        v = self.to_v(x).view(b, n, self.heads, self.dim_head).transpose(1, 2)
        attn = (q @ k.transpose(-1, -2)) * self.scale
        attn = attn.masked_fill(self.causal[:n, :n], float("-inf")).softmax(dim=-1)
        out = (attn @ v).transpose(0, 2).reshape(b, n, dim)
        return self.to_out(out)


TARGET = "Attention"
EXPECT = ("batch-independence", "reference-match", "gradient-match")
DIAGNOSIS = "batch-seq-swap"
LINE = 30
