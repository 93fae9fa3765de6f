"""Buggy (student style, split-view-order-keys): the queries and values are split the lesson's way, the keys with
view(B, H, T, hd) straight from (B, T, C), so each head's keys are slices across several tokens.

Style: Karpathy's `wei` / `tril`, `key` / `query` / `value`, an output `proj`.
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
        hs = C // self.n_head
        k = self.key(x).view(B, self.n_head, T, hs)
        q = self.query(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, hs).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * hs ** -0.5
        wei = F.softmax(wei.masked_fill(self.tril[:T, :T] == 0, float("-inf")), dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "MultiHead"
EXPECT = ("view-order", "reference-match")
DIAGNOSIS = "split-view-order-keys"
LINE = 25
