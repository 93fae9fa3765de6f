"""Buggy (student style, kvcache-position-not-advanced): the cache's offset is set to the call's length instead of
advanced by it: right after the prompt, then back to 1 after each generated token, so later tokens take the mask row
of position 1.

Style: einsum attention on (batch, tokens, heads, dim) tensors, cache kept as `k_cache` / `v_cache` along the tokens
axis, `offset`, a boolean `future` buffer, projections `to_q`, `to_k`, `to_v`, `to_out`.
"""
import torch
from torch import nn


class EinsumKVAttention(nn.Module):
    def __init__(self, dim, heads, max_len):
        super().__init__()
        assert dim % heads == 0, "dim must be divisible by heads"
        self.heads, self.dim_head = heads, dim // heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.register_buffer("future", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1))
        self.k_cache = self.v_cache = None
        self.offset = 0

    def reset_cache(self):
        self.k_cache = self.v_cache = None
        self.offset = 0

    def forward(self, x, use_cache=False):
        b, n, dim = x.shape
        q = self.to_q(x).unflatten(-1, (self.heads, self.dim_head))
        k = self.to_k(x).unflatten(-1, (self.heads, self.dim_head))
        v = self.to_v(x).unflatten(-1, (self.heads, self.dim_head))
        start = 0
        if use_cache:
            if self.k_cache is not None:
                k = torch.cat([self.k_cache, k], dim=1)
                v = torch.cat([self.v_cache, v], dim=1)
            self.k_cache, self.v_cache = k, v
            start = self.offset
            self.offset = n
        scores = torch.einsum("bihd,bjhd->bhij", q, k) / self.dim_head ** 0.5
        scores = scores.masked_fill(self.future[start:start + n, :k.shape[1]], float("-inf"))
        attn = scores.softmax(dim=-1)
        return self.to_out(torch.einsum("bhij,bjhd->bihd", attn, v).reshape(b, n, dim))


TARGET = "EinsumKVAttention"
EXPECT = ("kv-cache",)
DIAGNOSIS = "kvcache-position-not-advanced"
LINE = 41  # the offset set to this call's length, not advanced by it
