"""Correct: rotary attention in the rotate-half convention, cos/sin buffers, fused qkv, SDPA with is_causal=True.

Written for issue 31 by the integrator as a held-out set (each proven correct or buggy against an independent float64
reference before mha-check was run on it), then kept here. The divisibility check was added so that every
lesson rule holds.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "RoPEAttention"


class RoPEAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, max_len, rope_base=10000.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("the width must be divisible by the number of heads")
        self.h = num_heads
        self.hd = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.o = nn.Linear(embed_dim, embed_dim)
        inv = 1.0 / (rope_base ** (torch.arange(0, self.hd, 2).float() / self.hd))
        ang = torch.outer(torch.arange(max_len).float(), inv)  # (max_len, hd/2)
        ang = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    @staticmethod
    def _rotate_half(t):
        a, b = t.chunk(2, dim=-1)
        return torch.cat([-b, a], dim=-1)

    def _rope(self, t):
        n = t.shape[-2]
        cos, sin = self.cos[:n].to(t.dtype), self.sin[:n].to(t.dtype)
        return t * cos + self._rotate_half(t) * sin

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.h, self.hd).transpose(1, 2) for t in (q, k, v))
        q, k = self._rope(q), self._rope(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(B, T, C))
