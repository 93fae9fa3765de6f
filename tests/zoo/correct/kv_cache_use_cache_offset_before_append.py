"""Correct: a KV cache of the layer's own, `forward(x, use_cache=False)` and `reset_cache()`, the keys and values
kept in `past_k` / `past_v` (B, H, tokens, dh); the new queries take rows start .. start + T - 1 of a bool `tri`
buffer, start read before the new keys are appended.

Style: `q_lin` / `k_lin` / `v_lin` / `o_lin`, a `heads` helper method that splits, F.softmax.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CachedAttention(nn.Module):
    def __init__(self, d_model, n_heads, block_size=64):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.head_size = d_model // n_heads
        self.q_lin = nn.Linear(d_model, d_model)
        self.k_lin = nn.Linear(d_model, d_model)
        self.v_lin = nn.Linear(d_model, d_model)
        self.o_lin = nn.Linear(d_model, d_model)
        self.register_buffer("tri", torch.tril(torch.ones(block_size, block_size, dtype=torch.bool)))
        self.past_k = None
        self.past_v = None

    def heads(self, t):
        B, T, _ = t.shape
        return t.view(B, T, self.n_heads, self.head_size).transpose(1, 2)

    def reset_cache(self):
        self.past_k = self.past_v = None

    def forward(self, x, use_cache=False):
        B, T, C = x.shape
        q, k, v = self.heads(self.q_lin(x)), self.heads(self.k_lin(x)), self.heads(self.v_lin(x))
        start = 0
        if use_cache:
            if self.past_k is not None:
                start = self.past_k.shape[2]
                k = torch.cat([self.past_k, k], dim=2)
                v = torch.cat([self.past_v, v], dim=2)
            self.past_k, self.past_v = k, v
        S = k.shape[2]
        att = q @ k.transpose(-2, -1) / self.head_size ** 0.5
        att = att.masked_fill(~self.tri[start:start + T, :S], float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.o_lin(y.transpose(1, 2).contiguous().view(B, T, C))


TARGET = "CachedAttention"
EXPECT = ()
