"""Correct multi-query attention (Shazeer 2019): one key/value head shared by every query head, so k and v are
Linear(d_model, head_dim) and broadcast over the heads by the matmul (no repeat at all); no kv-heads parameter,
the output projection with a bias."""
import torch
import torch.nn as nn


class MultiQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, block_size, dropout=0.0):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.query = nn.Linear(d_model, d_model)
        self.key = nn.Linear(d_model, self.head_dim)
        self.value = nn.Linear(d_model, self.head_dim)
        self.proj = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        q = self.query(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        k = self.key(x).unsqueeze(1)  # (B, 1, T, hd): shared by every head
        v = self.value(x).unsqueeze(1)
        att = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5
        att = att.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        att = self.drop(torch.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


TARGET = "MultiQueryAttention"
EXPECT = ()
