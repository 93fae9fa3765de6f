"""Buggy (no-scaling, with the heads concatenated in reverse order): the scores are never divided by sqrt(head
size), and the heads' outputs are concatenated last head first before `proj`.

Style: "Let's build GPT": an nn.ModuleList of `Head` modules (key, query, value nn.Linear(n_embd, head_size,
bias=False) and a `tril` buffer), merged with `torch.cat([h(x) for h in reversed(self.heads)], dim=-1)`.  The
reversed concatenation alone is the lesson's layer with proj's input columns read last head first
(tests/zoo/correct/per_head_list_reversed.py); the missing scale is the mistake.
"""
import torch
import torch.nn as nn
from torch.nn import functional as F


class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)
        q = self.query(x)
        wei = q @ k.transpose(-2, -1)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        return wei @ self.value(x)


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        head_size = n_embd // n_head
        self.heads = nn.ModuleList([Head(n_embd, head_size, block_size) for _ in range(n_head)])
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in reversed(self.heads)], dim=-1))


TARGET = "MultiHeadAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "no-scaling"  # the mutant this mistake should be diagnosed as
