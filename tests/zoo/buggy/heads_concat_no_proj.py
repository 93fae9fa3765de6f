"""Buggy only by the missing output projection: the heads are concatenated and returned as they are, nothing after.
Every other step is the lesson's (each head scaled by its own width, causal, softmax over the keys), so read without
an output projection (W_o the identity, the lesson's layer without its last step) the lesson's math reproduces it:
reference-match, gradient-match and view-order judge it and pass, and only the missing projection is named.

Style: "Let's build GPT" before its `self.proj` is added (the CS224n / early-course layer): a class Head with
key / query / value nn.Linear(n_embd, head_size, bias=False), a `tril` buffer and `wei`, and a MultiHeadAttention
holding nn.ModuleList([Head(...) for _ in range(n_head)]) whose forward is torch.cat([h(x) for h in self.heads], -1).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)  # (B, T, hs)
        q = self.query(x)  # (B, T, hs)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B, T, T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        v = self.value(x)  # (B, T, hs)
        return wei @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.0):
        super().__init__()
        assert n_embd % n_head == 0
        head_size = n_embd // n_head
        self.heads = nn.ModuleList([Head(n_embd, head_size, block_size, dropout) for _ in range(n_head)])

    def forward(self, x):
        return torch.cat([h(x) for h in self.heads], dim=-1)  # the heads side by side, never mixed


TARGET = "MultiHeadAttention"
EXPECT = ("param-count", "out-proj-bias")
DIAGNOSIS = "no-output-projection"
MUST_PASS = ("reference-match", "gradient-match", "view-order", "causal-leakage", "head-invariance",
             "divisibility")  # judged under the reading without W_o, and right
