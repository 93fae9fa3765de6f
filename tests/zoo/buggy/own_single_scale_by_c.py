"""Buggy (student style, single-scale-by-d-in): one head of width head_size whose scores are scaled by C ** -0.5,
C read off the input (`B, T, C = x.shape`), the embedding width, where the keys hold head_size features: the
softmax is too flat when n_embd > head_size.  With n_embd == head_size it is right.

Style: the lecture's single `Head(n_embd, head_size, block_size)` written by a student: `key`, `query`, `value`,
`wei`, a `tril` buffer filled where it is 0, F.softmax, and a `dropout` module on the weights.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout=0.0):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k, q = self.key(x), self.query(x)
        wei = q @ k.transpose(-2, -1) * C ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = self.dropout(F.softmax(wei, dim=-1))
        return wei @ self.value(x)


TARGET = "Head"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "single-scale-by-d-in"
LINE = 25
