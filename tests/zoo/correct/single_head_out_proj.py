"""Correct: ONE attention head followed by an output projection - the lesson's layer with a single head, written
without heads (no split, no merge), as a student might after the single-head `CausalAttention` lesson: W_query,
W_key, W_value nn.Linear(d_in, d_out, bias=qkv_bias), out_proj nn.Linear(d_out, d_out), a bool tril buffer, scores
scaled by 1/sqrt(d_out), dropout on the weights.  Its constructor takes no number of heads, as the single-head
CausalAttention's; unlike it, the layer ends in an output projection (fairseq's SingleHeadAttention does the same):
it is the lesson's layer with H = 1, and must pass as that, its 3·d_in·d_out + d_out² + d_out parameters counted
as the lesson's.  Constructor (d_in, d_out, context_length, dropout=0.0, qkv_bias=False).
"""
import math

import torch
import torch.nn as nn

TARGET = "SingleHeadWithProjection"
EXPECT = ()


class SingleHeadWithProjection(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("causal", torch.tril(torch.ones(context_length, context_length, dtype=torch.bool)))

    def forward(self, x):
        n = x.shape[1]
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(~self.causal[:n, :n], float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        return self.out_proj(weights @ v)
