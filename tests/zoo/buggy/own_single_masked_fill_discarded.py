"""Buggy (student style, single-masked-fill-discarded): one causal head calls `wei.masked_fill(...)` as if it
worked in place; its result is thrown away, so the softmax runs over unmasked scores and every token sees the
future.

Style: Karpathy's single `Head` (`key` / `query` / `value`, `wei`, a `tril` buffer, `head_size`).
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
        k = self.key(x)
        q = self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        v = self.value(x)
        return wei @ v


TARGET = "Head"
EXPECT = ("causal-leakage", "reference-match", "gradient-match")
DIAGNOSIS = "single-masked-fill-discarded"
LINE = 25
