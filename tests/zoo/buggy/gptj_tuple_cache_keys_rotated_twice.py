"""Buggy (student style, student11): GPT-J's rotary embedding (sin/cos repeat_interleaved, rotate_every_two) with a
KV cache handed back and forth as a tuple (`layer_past`, returned as `present`). The keys go into the cache already
rotated, and every call rotates the whole key tensor, cached keys included, at positions 0 .. past + n - 1: each
cached key is rotated twice (turned by twice its angle, and more on every later call). The prompt is right; the
first decoded token is wrong. kv-cache fails with no catalogued mistake, and its fix had spoken of reset_cache() and
ptr, which a tuple cache has not: it now speaks of the cache handed in and of rotating each key once. The trace's mark
of keys rotated twice read only caches kept on the layer (`self.cache_k`), and gave this one no line (fixes28b item
3): the rotation of the joined keys is told at its line, the cache returned being the keys it turned.

Style: `q_proj` / `k_proj` / `v_proj` / `out_proj`, a boolean `bias` buffer (GPT-2's name), a finfo.min fill.
"""
import torch
import torch.nn as nn


def rotate_every_two(x):
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


def sincos(positions, dim, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64, device=positions.device) / dim))
    ang = positions[:, None].to(torch.float64) * inv[None, :]
    return ang.sin().repeat_interleave(2, dim=-1), ang.cos().repeat_interleave(2, dim=-1)


TARGET = "GPTJAttention"
EXPECT = ("kv-cache",)
DIAGNOSIS = None
LINE = 64  # the joined keys, the cached ones among them, rotated
MUST_PASS = ("reference-match", "gradient-match", "causal-leakage", "mask-buffer")


class GPTJAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, max_positions):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=False)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.register_buffer("bias", torch.tril(torch.ones(max_positions, max_positions, dtype=torch.bool)))

    def forward(self, x, layer_past=None):
        B, T, C = x.shape
        q = self.q_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        past = 0 if layer_past is None else layer_past[0].shape[-2]
        pos = torch.arange(past, past + T, device=x.device)
        sin, cos = sincos(pos, self.head_dim)
        sin, cos = sin.to(x.dtype), cos.to(x.dtype)
        q = q * cos + rotate_every_two(q) * sin
        if layer_past is not None:
            k = torch.cat([layer_past[0], k], dim=-2)
            v = torch.cat([layer_past[1], v], dim=-2)
        kpos = torch.arange(0, past + T, device=x.device)
        ksin, kcos = sincos(kpos, self.head_dim)
        ksin, kcos = ksin.to(x.dtype), kcos.to(x.dtype)
        k = k * kcos + rotate_every_two(k) * ksin
        present = (k, v)
        w = q @ k.transpose(-1, -2) / self.head_dim ** 0.5
        w = w.masked_fill(~self.bias[past:past + T, :past + T], torch.finfo(w.dtype).min)
        w = w.softmax(-1)
        out = (w @ v).transpose(1, 2).reshape(B, T, C)
        return self.out_proj(out), present
