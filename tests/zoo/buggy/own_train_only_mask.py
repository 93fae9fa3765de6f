"""Buggy (student style, train-only-leak): the mask is applied only in eval ("generation") mode."""
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, heads, max_len):
        super().__init__()
        self.heads, self.dh = heads, dim // heads
        self.to_qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.register_buffer("future", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.to_qkv(x).view(B, T, 3, self.heads, self.dh).permute(2, 0, 3, 1, 4)
        att = q @ k.transpose(-1, -2) * self.dh ** -0.5
        if not self.training:  # only generation needs the mask
            att = att.masked_fill(self.future[:T, :T], float("-inf"))
        return self.to_out((att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


TARGET = "Attention"
EXPECT = ("causal-leakage",)
DIAGNOSIS = "train-only-leak"
LINE = 18
