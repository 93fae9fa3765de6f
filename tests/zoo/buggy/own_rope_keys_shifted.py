"""Buggy (student style, rope-keys-shifted): einsum attention with interleaved rotary pairs (even/odd features
stacked back), a constructor of its own (`width`, `heads`, `seq_len`), tables `cos_t`/`sin_t` indexed by a
positions tensor; the keys are turned at positions 1..n, one ahead of the queries."""
import torch
from torch import nn


def apply_rotary(x, cos, sin):
    even, odd = x[..., ::2], x[..., 1::2]
    return torch.stack([even * cos - odd * sin, even * sin + odd * cos], dim=-1).flatten(-2)


class EinsumRotaryAttention(nn.Module):
    def __init__(self, width, heads, seq_len):
        super().__init__()
        if width % heads != 0:
            raise ValueError(f"width {width} does not split into {heads} heads")
        self.heads, self.d_head = heads, width // heads
        self.W_q = nn.Parameter(torch.randn(width, width) / width ** 0.5)
        self.W_k = nn.Parameter(torch.randn(width, width) / width ** 0.5)
        self.W_v = nn.Parameter(torch.randn(width, width) / width ** 0.5)
        self.W_o = nn.Linear(width, width)
        theta = 10000.0 ** (-torch.arange(0, self.d_head, 2) / self.d_head)
        angle = torch.arange(seq_len + 1)[:, None] * theta[None, :]
        self.register_buffer("cos_t", angle.cos())
        self.register_buffer("sin_t", angle.sin())
        self.register_buffer("future", torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        b, t, _ = x.shape
        q = torch.einsum("btc,dc->btd", x, self.W_q).unflatten(-1, (self.heads, self.d_head))
        k = torch.einsum("btc,dc->btd", x, self.W_k).unflatten(-1, (self.heads, self.d_head))
        v = torch.einsum("btc,dc->btd", x, self.W_v).unflatten(-1, (self.heads, self.d_head))
        pos = torch.arange(t, device=x.device)[:, None]
        q = apply_rotary(q, self.cos_t[pos], self.sin_t[pos])
        k = apply_rotary(k, self.cos_t[pos + 1], self.sin_t[pos + 1])
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / self.d_head ** 0.5
        weights = scores.masked_fill(self.future[:t, :t], float("-inf")).softmax(dim=-1)
        mixed = torch.einsum("bhqk,bkhd->bqhd", weights, v)
        return self.W_o(mixed.flatten(2))


TARGET = "EinsumRotaryAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "rope-keys-shifted"
LINE = 36
