"""Rotate-half rotary attention (tests/zoo/correct/rotary_half_buffers.py) whose keys read the cos/sin tables one row
further on than the queries: query and key positions out of step."""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "RoPEAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "rope-keys-shifted"


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
        angles = torch.arange(context_length + 1).float()[:, None] * inv_freq[None, :]
        angles = torch.cat([angles, angles], dim=-1)  # (context_length, head_dim)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        cos, sin = self.cos[:n].to(x.dtype), self.sin[:n].to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * self.cos[1:n + 1].to(x.dtype) + rotate_half(k) * self.sin[1:n + 1].to(x.dtype)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(b, n, d))
