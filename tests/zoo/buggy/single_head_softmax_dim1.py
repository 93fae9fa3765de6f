"""Buggy: one causal head with the softmax over dim=1 (the queries) of a (B, T, T) score tensor.

Written for issue 31 by the integrator as a held-out set (each proven correct or buggy against an independent float64
reference before mha-check was run on it), then kept here.
"""
import math
import torch
import torch.nn as nn

TARGET = "CausalSelfAttentionHead"
EXPECT = ('causal-leakage', 'reference-match')
DIAGNOSIS = "single-softmax-wrong-axis"


class CausalSelfAttentionHead(nn.Module):
    """One causal attention head with raw parameter matrices (x @ W)."""

    def __init__(self, d_in, d_out, context_length, dropout=0.0):
        super().__init__()
        self.Wq = nn.Parameter(torch.randn(d_in, d_out) / math.sqrt(d_in))
        self.Wk = nn.Parameter(torch.randn(d_in, d_out) / math.sqrt(d_in))
        self.Wv = nn.Parameter(torch.randn(d_in, d_out) / math.sqrt(d_in))
        self.drop = nn.Dropout(dropout)
        self.register_buffer("tril", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        T = x.shape[1]
        q, k, v = x @ self.Wq, x @ self.Wk, x @ self.Wv
        att = torch.einsum("btd,bsd->bts", q, k) / math.sqrt(k.shape[-1])
        att = att.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        att = self.drop(att.softmax(dim=1))
        return att @ v
