"""Buggy (student style, swapped-q-k): the keys are projected with `self.query` and the queries with `self.key` (the
projections declared key first, as in the lecture, and the forward's lines written in the other order): every shape
is right and nothing leaks, but each score is the transposed one, token s asking token t.

Style: Karpathy's `key` / `query` / `value` and `proj`, `wei`, a `tril` buffer, `n_head` / `head_size`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head, self.head_size = n_head, n_embd // n_head
        self.key = nn.Linear(n_embd, n_embd, bias=False)
        self.query = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(n_embd, n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        k = self.query(x).view(B, T, self.n_head, self.head_size).transpose(1, 2)
        q = self.key(x).view(B, T, self.n_head, self.head_size).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, self.head_size).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * self.head_size ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "MultiHeadAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "swapped-q-k"
LINE = 25  # the keys' line, marked first; the queries' (26) is marked too
