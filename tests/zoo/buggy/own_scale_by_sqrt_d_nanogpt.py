"""Buggy (student style, scale-by-sqrt-d): the scores are scaled by C ** -0.5, the model width, as in a single-head
Karpathy layer, not by the head width: the softmax is too flat.

Style: Karpathy's `wei` / `tril` and `key` / `query` / `value`, an output `proj`.
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
        k = self.key(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = self.query(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * C ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "MultiHead"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-by-sqrt-d"
LINE = 27
