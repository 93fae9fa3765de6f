"""Buggy (two mistakes at once, split-view-order and merge-no-transpose): the heads are split with view(B, H, T, hs)
straight from (B, T, C), and merged back with view(B, T, C) straight from (B, H, T, hs), without either transpose.
The student read the two views as inverses of each other, which they are (the memory is never reordered), so the
shapes agree everywhere; but attention runs over each head's "positions", which are chunks cut across several
tokens, so the outputs are wrong and early tokens read later ones.

Style: Karpathy's `wei` / `tril`, `key` / `query` / `value`, an output `proj`.  Neither mistake alone reproduces the
outputs: only both together do.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHead(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.query = nn.Linear(n_embd, n_embd, bias=False)
        self.key = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(n_embd, n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q = self.query(x).view(B, self.n_head, T, hs)
        k = self.key(x).view(B, self.n_head, T, hs)
        v = self.value(x).view(B, self.n_head, T, hs)
        wei = q @ k.transpose(-2, -1) * hs ** -0.5
        wei = F.softmax(wei.masked_fill(self.tril[:T, :T] == 0, float("-inf")), dim=-1)
        out = (wei @ v).view(B, T, C)
        return self.proj(out)


TARGET = "MultiHead"
EXPECT = ("view-order", "causal-leakage", "reference-match")
DIAGNOSIS = ("split-view-order", "merge-no-transpose")  # two mistakes at once: both named, each at its line
LINES = (29, 34)
