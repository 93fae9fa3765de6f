"""Buggy (student style, rope-keys-not-rotated): complex-number rotary (torch.polar, torch.view_as_complex, a
`phases` table, heads folded as `nh`/`hs`, F.scaled_dot_product_attention); the queries are turned, the keys never."""
import torch
import torch.nn as nn
import torch.nn.functional as F


def spin(z, phases):
    pairs = torch.view_as_complex(z.reshape(*z.shape[:-1], -1, 2))
    return torch.view_as_real(pairs * phases).flatten(-2)


class ComplexRopeAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, block_size, rope_base=10000.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be a multiple of num_heads")
        self.nh, self.hs = num_heads, embed_dim // num_heads
        self.query = nn.Linear(embed_dim, embed_dim, bias=False)
        self.key = nn.Linear(embed_dim, embed_dim, bias=False)
        self.value = nn.Linear(embed_dim, embed_dim, bias=False)
        self.proj = nn.Linear(embed_dim, embed_dim)
        inv_freq = 1.0 / rope_base ** (torch.arange(0, self.hs, 2).float() / self.hs)
        self.register_buffer("angles", torch.outer(torch.arange(block_size).float(), inv_freq))

    def forward(self, x):
        bs, seq, dim = x.shape
        heads = lambda t: t.view(bs, seq, self.nh, self.hs).transpose(1, 2)
        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        ang = self.angles[:seq]
        phases = torch.polar(torch.ones_like(ang), ang)
        q = spin(q, phases)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(bs, seq, dim))


TARGET = "ComplexRopeAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "rope-keys-not-rotated"
LINE = 32
