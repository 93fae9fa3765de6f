"""Buggy (student style, no-mask): Karpathy's Head in an nn.ModuleList, the tril buffer made and never applied.

Style: one `Head` module per head (key / query / value, `wei`, a registered `tril`), concatenated by a
`MultiHeadAttention` with an output `proj`. The line `wei = wei.masked_fill(self.tril[:T, :T] == 0, ...)` was left
out, so every token attends to the future. The forward runs one softmax per head, all at the same line: the report
must still point there (trial13: a no-mask of this layout was told with no line at all).
"""
import torch
import torch.nn as nn
from torch.nn import functional as F


class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        k = self.key(x)
        q = self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        return wei @ self.value(x)


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, num_heads, block_size, dropout=0.0):
        super().__init__()
        if n_embd % num_heads:
            raise ValueError(f"n_embd={n_embd} is not divisible by num_heads={num_heads}")
        head_size = n_embd // num_heads
        self.heads = nn.ModuleList([Head(n_embd, head_size, block_size, dropout) for _ in range(num_heads)])
        self.proj = nn.Linear(n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        return self.dropout(self.proj(out))


TARGET = "MultiHeadAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "no-mask"
LINE = 26  # the softmax, before which the mask belongs
