"""Buggy (student style, zero-after-softmax): the softmax runs over every position and the future weights are
zeroed afterwards by multiplying with the lower-triangular `tril`, so rows no longer sum to 1 and the future still
changes the past through the normaliser.

Style: Karpathy's `wei` / `tril`, `key` / `query` / `value` projections, an output `proj`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MaskedAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.key = nn.Linear(n_embd, n_embd, bias=False)
        self.query = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(n_embd, n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        k = self.key(x).view(B, T, self.n_head, hs).transpose(1, 2)
        q = self.query(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, hs).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * hs ** -0.5
        wei = F.softmax(wei, dim=-1)
        wei = wei * self.tril[:T, :T]
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "MaskedAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "zero-after-softmax"
LINE = 31
