"""Buggy (student style, merge-view-d-in): merges the heads back to the input's width C, not d_out."""
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.num_heads, self.head_dim = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool())

    def forward(self, x):
        B, T, C = x.shape
        split = lambda t: t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        att = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5
        att = torch.softmax(att.masked_fill(self.mask[:T, :T], float("-inf")), dim=-1)
        y = (self.dropout(att) @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.out_proj(y)


TARGET = "MultiHeadAttention"
EXPECT = ("output-shape",)
DIAGNOSIS = "merge-view-d-in"
LINE = 24
