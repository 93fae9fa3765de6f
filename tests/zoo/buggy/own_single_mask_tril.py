"""Buggy (student style, single-mask-tril): one causal head whose mask of positions to hide is built with
torch.tril, the past and the token itself, instead of torch.triu(..., diagonal=1), the future: every token sees
only later tokens and the last one sees nothing (its weights are NaN).

Style: one head with `W_query` / `W_key` / `W_value`, `attn_scores` filled in place, a float `mask` buffer made
boolean in forward (the book's layer, its mask line written from memory).
"""
import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout=0.0):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        n = x.shape[1]
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(self.mask.bool()[:n, :n], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return self.dropout(attn_weights) @ values


TARGET = "CausalAttention"
EXPECT = ("output-shape", "causal-leakage", "reference-match", "gradient-match")
DIAGNOSIS = "single-mask-tril"
LINE = 25  # the masked_fill that uses the mask (inverted there, it passes); the tril is on 19
