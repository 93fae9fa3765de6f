"""Buggy: the keys and the values split with view(B, H, n, dh), the queries right: two projections of three.

Style: a compact layer with separate q/k/v Linear layers and a helper for the "memory" side. The author split the
queries the lesson's way but wrote a second helper for keys and values that views (B, n, d) straight as
(B, H, n, dh). view-order must fail and say that the keys and values are split wrongly; the catalogue once had
all three projections or one alone, and this file went unnamed; it is now named split-view-order-keys-values,
a mutant added after this file was written (so this case no longer counts as unseen evidence for it).
"""
import torch
import torch.nn as nn


class KVAttention(nn.Module):
    def __init__(self, d_model, num_heads, max_len):
        super().__init__()
        assert d_model % num_heads == 0
        self.h, self.dh = num_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.o_proj = nn.Linear(d_model, d_model)
        self.register_buffer("causal", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), 1))

    def forward(self, x):
        B, n, d = x.shape
        q = self.q_proj(x).view(B, n, self.h, self.dh).transpose(1, 2)
        memory = lambda t: t.view(B, self.h, n, self.dh)
        k, v = memory(self.k_proj(x)), memory(self.v_proj(x))
        att = (q @ k.transpose(-2, -1)) * self.dh ** -0.5
        att = att.masked_fill(self.causal[:n, :n], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, n, d)
        return self.o_proj(y)


TARGET = "KVAttention"
EXPECT = ("view-order", "reference-match", "causal-leakage")
DIAGNOSIS = "split-view-order-keys-values"  # the mutant this mistake should be diagnosed as
