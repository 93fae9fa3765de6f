"""Buggy (two mistakes at once, split-view-order and scale-by-sqrt-d): the heads are split with view(B, H, T, hs)
straight from (B, T, C), and the scores are scaled by C ** -0.5, the single-head lecture's line kept when the layer
grew heads (the model width, not the head width).

Style: Karpathy's `wei` / `tril`, `key` / `query` / `value`, an output `proj`.  The merge is the lesson's.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHead(nn.Module):
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
        k = self.key(x).view(B, self.n_head, T, hs)
        q = self.query(x).view(B, self.n_head, T, hs)
        v = self.value(x).view(B, self.n_head, T, hs)
        wei = q @ k.transpose(-2, -1) * C ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "MultiHead"
EXPECT = ("view-order", "causal-leakage", "reference-match")
DIAGNOSIS = ("split-view-order", "scale-by-sqrt-d")  # two mistakes at once: both named, each at its line
LINES = (26, 29)
