"""Buggy (student style, single-softmax-wrong-axis): one causal attention head whose softmax runs over dim=1 of the
(B, T, T) scores, the queries, not over the keys.

Style: one head with `W_query` / `W_key` / `W_value` (no output projection), scores `wei`, a `tril` buffer.
"""
import torch
import torch.nn as nn


class SelfAttentionHead(nn.Module):
    def __init__(self, d_in, d_out, context_length):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        T = x.shape[1]
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        wei = q @ k.transpose(1, 2) / k.shape[-1] ** 0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = torch.softmax(wei, dim=1)
        return wei @ v


TARGET = "SelfAttentionHead"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "single-softmax-wrong-axis"
LINE = 23
