"""Correct: causal MHA with a KV cache (forward(x, use_cache=True), reset_cache()), mask rows offset by a position pointer.

Written for issue 31 by the integrator as a held-out set (each proven correct or buggy against an independent float64
reference before mha-check was run on it), then kept here. The divisibility check was added so that every
lesson rule holds.
"""
import torch
import torch.nn as nn

TARGET = "CachedCausalMHA"


class CachedCausalMHA(nn.Module):
    """Causal MHA with a key/value cache for generation: forward(x, use_cache=True) appends to the cache."""

    def __init__(self, d_model, n_heads, max_len, dropout=0.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("the width must be divisible by the number of heads")
        self.n_heads, self.hd = n_heads, d_model // n_heads
        self.Wq = nn.Linear(d_model, d_model, bias=False)
        self.Wk = nn.Linear(d_model, d_model, bias=False)
        self.Wv = nn.Linear(d_model, d_model, bias=False)
        self.Wo = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), 1), persistent=False)
        self.k_cache = None
        self.v_cache = None
        self.pos = 0

    def reset_cache(self):
        self.k_cache, self.v_cache, self.pos = None, None, 0

    def forward(self, x, use_cache=False):
        B, n, d = x.shape
        sp = lambda t: t.view(B, n, self.n_heads, self.hd).transpose(1, 2)
        q, k, v = sp(self.Wq(x)), sp(self.Wk(x)), sp(self.Wv(x))
        if use_cache:
            if self.k_cache is not None:
                k = torch.cat([self.k_cache, k], dim=2)
                v = torch.cat([self.v_cache, v], dim=2)
            self.k_cache, self.v_cache = k, v
            start = self.pos
            self.pos += n
        else:
            start = 0
        total = k.shape[2]
        s = q @ k.transpose(2, 3) / self.hd ** 0.5
        s = s.masked_fill(self.mask[start:start + n, :total], float("-inf"))
        w = self.drop(torch.softmax(s, dim=-1))
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)
        return self.Wo(ctx)
