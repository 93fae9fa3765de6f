"""Buggy (student style, rope-model-width-freqs): a rotary submodule of its own (`RotaryTable`, built once in
__init__ and called with the sequence length), rotate_half applied per head after a `rearrange`-like reshape,
attention with torch.bmm over heads folded into the batch; the frequencies' exponent is divided by the model width
`dim`, not the head width."""
import torch
import torch.nn as nn


class RotaryTable(nn.Module):
    def __init__(self, head_dim, dim, max_positions, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / dim))
        freqs = torch.einsum("i,j->ij", torch.arange(max_positions).float(), inv_freq)
        self.register_buffer("cos", torch.cat([freqs, freqs], dim=-1).cos(), persistent=False)
        self.register_buffer("sin", torch.cat([freqs, freqs], dim=-1).sin(), persistent=False)

    def forward(self, length):
        return self.cos[:length], self.sin[:length]


def turn(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


class BmmRotaryAttention(nn.Module):
    def __init__(self, dim, num_heads, max_positions):
        super().__init__()
        assert dim % num_heads == 0
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.to_q, self.to_k, self.to_v = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.to_out = nn.Linear(dim, dim)
        self.rotary = RotaryTable(self.head_dim, dim, max_positions)
        self.register_buffer("allowed", torch.tril(torch.ones(max_positions, max_positions)).bool())

    def forward(self, x):
        batch, length, dim = x.shape

        def heads(t):
            return t.reshape(batch, length, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

        q, k, v = heads(self.to_q(x)), heads(self.to_k(x)), heads(self.to_v(x))
        cos, sin = self.rotary(length)
        q, k = turn(q, cos, sin), turn(k, cos, sin)
        q, k, v = (t.reshape(batch * self.num_heads, length, self.head_dim) for t in (q, k, v))
        sim = torch.bmm(q, k.transpose(1, 2)) * self.head_dim ** -0.5
        sim = sim.masked_fill(~self.allowed[:length, :length], float("-inf"))
        out = torch.bmm(sim.softmax(dim=-1), v).reshape(batch, self.num_heads, length, self.head_dim)
        return self.to_out(out.permute(0, 2, 1, 3).reshape(batch, length, dim))


TARGET = "BmmRotaryAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "rope-model-width-freqs"
LINE = 12
