"""Buggy: one head module repeated for every head, `nn.ModuleList([Head(...)] * num_heads)`.

Style: Karpathy's lecture layer (a `Head` class with key/query/value of width head_size, `wei`, a `tril` buffer,
heads concatenated and projected by `proj`), written by a student who built the list by multiplying a one-element
list. Python's `[x] * n` repeats the same object: every head computes with one set of W_q, W_k, W_v, nn.ModuleList
holds that module once, and model.parameters() counts one head's weights. The parameter count falls as heads are
added (the lesson's count has no H in it), and all heads give the same output.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
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
    def __init__(self, n_embd, num_heads, block_size):
        super().__init__()
        assert n_embd % num_heads == 0
        head_size = n_embd // num_heads
        self.heads = nn.ModuleList([Head(n_embd, head_size, block_size)] * num_heads)  # BUG: one module, repeated
        self.proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        out = torch.cat([h(x) for h in self.heads], dim=-1)
        return self.proj(out)


TARGET = "MultiHeadAttention"
EXPECT = ("head-invariance", "param-count", "reference-match")
DIAGNOSIS = None  # no catalogued mistake is one head shared by all; head-invariance and param-count say what it is
