"""Buggy: no divisibility check; head_size = n_embd // n_head silently drops features when n_head does not divide.

Style: Karpathy's lecture gpt.py (ModuleList of Heads, proj = nn.Linear(head_size * num_heads, n_embd)), exactly
as in the lecture, i.e. without an assert. With n_embd=10 and 3 heads it builds 3 heads of size 3 (9 features) and
a 9->10 projection, and runs without complaint. For divisible sizes it is correct.
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
        self.register_buffer('tril', torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)
        q = self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1]**-0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float('-inf'))
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        v = self.value(x)
        return wei @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        head_size = n_embd // n_head
        self.heads = nn.ModuleList([Head(n_embd, head_size, block_size, dropout) for _ in range(n_head)])
        self.proj = nn.Linear(head_size * n_head, n_embd)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        return self.proj(out)


TARGET = "MultiHeadAttention"
EXPECT = ("divisibility",)
DIAGNOSIS = "no-divisibility-check"  # the mutant this mistake should be diagnosed as
