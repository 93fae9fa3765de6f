"""Buggy (student style, merge-strided): the heads are split the lesson's way (view(B, T, nh, hs).transpose(1, 2)),
but merged with permute(0, 2, 3, 1).reshape(B, T, C), which interleaves them: feature j of head h lands at j·nh + h
instead of h·hs + j, so the output projection reads every head's features in the wrong places.

Style: Karpathy-like names (`key`, `query`, `value`, `proj`, `wei`), a permute written to "undo" the split.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.key = nn.Linear(n_embd, n_embd, bias=False)
        self.query = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(n_embd, n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("mask", torch.triu(torch.ones(block_size, block_size, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q = self.query(x).view(B, T, self.n_head, hs).transpose(1, 2)
        k = self.key(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, hs).transpose(1, 2)
        wei = (q @ k.transpose(-2, -1)) * hs ** -0.5
        wei = F.softmax(wei.masked_fill(self.mask[:T, :T], float("-inf")), dim=-1)
        out = (wei @ v).permute(0, 2, 3, 1).reshape(B, T, C)  # (B, nh, T, hs) -> (B, T, C)
        return self.proj(out)


TARGET = "MultiHeadAttention"
EXPECT = ("view-order", "reference-match")
DIAGNOSIS = "merge-strided"
LINE = 31
