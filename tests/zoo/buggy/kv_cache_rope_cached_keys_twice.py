"""Buggy (fixes28 item 5): rotary attention (rotate-half, cos/sin buffers) with LLMs-from-scratch ch04's cache
(`forward(x, use_cache=False)`, `reset_cache()`): the new keys are joined to the cached ones first, and the whole
key tensor is rotated afterwards at positions 0 .. cached + n - 1. The cached keys went in rotated, so each is
rotated a second time on every later call (by twice its angle, then three times ...). The prompt, on an empty
cache, is right, and so is the plain forward: only the decoded tokens are wrong. kv-cache fails, and the rotation of
the joined keys is told at its line.

Style: `correct/rotary_kv_cache.py` with the rotation moved after the join; the queries rotated from the cache's
position, as they should be.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "RotaryCacheRotatedTwice"
EXPECT = ("kv-cache",)
DIAGNOSIS = None  # no catalogued mistake is this one: kv-cache fails, and the line is told
LINE = 57
MUST_PASS = ("reference-match", "gradient-match", "causal-leakage")


class RotaryCacheRotatedTwice(nn.Module):
    def __init__(self, embed_dim, num_heads, max_len, rope_base=10000.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.h, self.hd = num_heads, embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.o = nn.Linear(embed_dim, embed_dim)
        inv = 1.0 / (rope_base ** (torch.arange(0, self.hd, 2).float() / self.hd))
        ang = torch.outer(torch.arange(max_len).float(), inv)
        ang = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)
        self.k_cache = self.v_cache = None
        self.pos = 0

    def reset_cache(self):
        self.k_cache = self.v_cache = None
        self.pos = 0

    def _rope(self, t, start):
        n = t.shape[-2]
        cos, sin = self.cos[start:start + n].to(t.dtype), self.sin[start:start + n].to(t.dtype)
        a, b = t.chunk(2, dim=-1)
        return t * cos + torch.cat([-b, a], dim=-1) * sin

    def forward(self, x, use_cache=False):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.h, self.hd).transpose(1, 2) for t in (q, k, v))
        start = self.pos if use_cache else 0
        q = self._rope(q, start)
        if use_cache and self.k_cache is not None:
            k = torch.cat([self.k_cache, k], dim=2)
            v = torch.cat([self.v_cache, v], dim=2)
        k = self._rope(k, 0)  # every key, the cached ones (already rotated) too
        if use_cache:
            self.k_cache, self.v_cache = k, v
            self.pos += T
        S = k.shape[2]
        mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=S - T)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.o(y.transpose(1, 2).reshape(B, T, C))
