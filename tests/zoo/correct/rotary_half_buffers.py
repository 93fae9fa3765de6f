"""Rotate-half rotary attention in the style of HF transformers and rasbt's LLMs-from-scratch: cos/sin tables of the
full head width (the angles repeated twice) precomputed as buffers, `rotate_half`, a fused QKV projection and
scaled_dot_product_attention with is_causal=True; the positions are the layer's own (0..n-1)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "RoPEAttention"


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class RoPEAttention(nn.Module):
    def __init__(self, emb_dim, n_heads, context_length, dropout=0.0, rope_base=10_000):
        super().__init__()
        assert emb_dim % n_heads == 0
        self.n_heads, self.head_dim = n_heads, emb_dim // n_heads
        self.qkv = nn.Linear(emb_dim, 3 * emb_dim, bias=False)
        self.proj = nn.Linear(emb_dim, emb_dim)
        self.dropout = dropout
        inv_freq = 1.0 / (rope_base ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.arange(context_length).float()[:, None] * inv_freq[None, :]
        angles = torch.cat([angles, angles], dim=-1)  # (context_length, head_dim)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        cos, sin = self.cos[:n].to(x.dtype), self.sin[:n].to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(b, n, d))
