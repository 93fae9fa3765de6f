"""Correct: rotary attention whose inverse frequencies are kept as a FROZEN parameter of the head width,
nn.Parameter(base ** (-2i / dh), requires_grad=False). Such a table has dh / 2 elements, so the module's parameter
count changes with the number of heads (6, 3, 2 ... elements for d_out = 12), but nothing learns it: it is a
constant of the layer, as a buffer would be, and neither param-count nor head-invariance may count it (labml's RETRO
SelfAttention keeps its RoPE theta so).

Style: one fused Linear(d, 3d) chunked in three, interleaved-pair RoPE ((x0, x1) rotated together), a causal mask
made in forward with torch.ones(..., device=x.device).triu(1), SDPA-free softmax, output projection with a bias.
"""
import torch
import torch.nn as nn


class FrozenRopeFrequenciesAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, max_len):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.num_heads, self.dh = num_heads, embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.out = nn.Linear(embed_dim, embed_dim)
        steps = torch.arange(0, self.dh, 2, dtype=torch.float64) / self.dh
        self.inv_freq = nn.Parameter(10000.0 ** -steps, requires_grad=False)
        self.max_len = max_len

    def rotate(self, t):
        n = t.shape[-2]
        angles = torch.arange(n, dtype=t.dtype, device=t.device)[:, None] * self.inv_freq.to(t.dtype)
        cos, sin = angles.cos(), angles.sin()
        even, odd = t[..., 0::2], t[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(b, n, self.num_heads, self.dh).transpose(1, 2) for t in (q, k, v))
        q, k = self.rotate(q), self.rotate(k)
        scores = q @ k.transpose(-1, -2) / self.dh ** 0.5
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(b, n, d))


TARGET = "FrozenRopeFrequenciesAttention"
EXPECT = ()
