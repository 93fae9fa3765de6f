"""Buggy (student style, no catalogued mistake exactly): one head module repeated, `nn.ModuleList([head] * num_heads)`,
so every head shares the same queries, keys and values (nn.ModuleList holds the module once): the count falls as
heads are added, and every head computes the same thing.

From a student's trial: head-invariance's fix said "not one full-width projection per head" to heads already
d / H wide; a count that shrinks now gets its own fix (shared heads, or parameters sized by one head alone).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class OneHead(nn.Module):
    def __init__(self, n_embd, head_size, block_size):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        k, q = self.key(x), self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        return wei @ self.value(x)


class MultiHeadAttention(nn.Module):
    def __init__(self, num_heads, n_embd, block_size):
        super().__init__()
        assert n_embd % num_heads == 0
        head = OneHead(n_embd, n_embd // num_heads, block_size)
        self.heads = nn.ModuleList([head] * num_heads)
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in self.heads], dim=-1))


TARGET = "MultiHeadAttention"
EXPECT = ("head-invariance", "param-count")
DIAGNOSIS = None
UNNAMED_OK = True  # no mutant shares one head among all: naming none is right
