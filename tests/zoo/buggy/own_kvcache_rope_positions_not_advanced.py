"""Buggy (student style, kvcache-rope-positions-not-advanced): rotary attention with a KV cache whose mask follows
the cache, but whose rotation does not: every call's tokens are turned from position 0, so a decoded token's query
and key sit at the first token's angle against the cached keys.

Style: interleaved rotary pairs (even/odd features stacked back), `cos_t` / `sin_t` tables indexed by a positions
tensor, W_q / W_k / W_v and `W_o`, `att`, cache kept as `cache_k` / `cache_v` with a counter `n_past`.
"""
import torch
import torch.nn as nn


def rotate_pairs(x, cos, sin):
    even, odd = x[..., ::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


class RotaryCachedMHA(nn.Module):
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("d_model must be divisible by n_heads")
        self.n_heads, self.hd = n_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.W_o = nn.Linear(d_model, d_model)
        freqs = 10000.0 ** (-torch.arange(0, self.hd, 2) / self.hd)
        angle = torch.arange(max_len)[:, None] * freqs[None, :]
        self.register_buffer("cos_t", angle.cos())
        self.register_buffer("sin_t", angle.sin())
        self.register_buffer("tril", torch.tril(torch.ones(max_len, max_len)))
        self.cache_k = self.cache_v = None
        self.n_past = 0

    def reset_cache(self):
        self.cache_k = self.cache_v = None
        self.n_past = 0

    def forward(self, x, use_cache=False):
        B, T, C = x.shape
        q = self.W_q(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        past = self.n_past if use_cache else 0
        pos = torch.arange(T, device=x.device)
        q = rotate_pairs(q, self.cos_t[pos], self.sin_t[pos])
        k = rotate_pairs(k, self.cos_t[pos], self.sin_t[pos])
        if use_cache:
            if self.cache_k is not None:
                k = torch.cat([self.cache_k, k], dim=2)
                v = torch.cat([self.cache_v, v], dim=2)
            self.cache_k, self.cache_v = k, v
            self.n_past += T
        att = q @ k.transpose(-2, -1) / self.hd ** 0.5
        att = att.masked_fill(self.tril[past:past + T, :k.shape[2]] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        return self.W_o((att @ v).transpose(1, 2).reshape(B, T, C))


TARGET = "RotaryCachedMHA"
EXPECT = ("kv-cache",)
DIAGNOSIS = "kvcache-rope-positions-not-advanced"
LINE = 45  # the positions from 0 on every call, not from the cached tokens' count
