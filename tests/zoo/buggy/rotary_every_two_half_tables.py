"""Buggy (fixes28b item 1, the reverse of rotary_half_interleaved_tables.py): tables holding the frequencies twice
over (`torch.cat((angles, angles))`, rotate-half's layout) applied with rotate-every-two, which pairs x0 with x1, x2
with x3: no rotation. reference-match fails against the interleaved reference, and trace marks the queries' rotation.

Style: raw `W_q` / `W_k` / `W_v` Parameters used as x @ W, einsum scores `att`, a boolean `causal` buffer.
"""
import torch
import torch.nn as nn


def rotate_every_two(x):
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


class RopeAttention(nn.Module):
    def __init__(self, d_model, num_heads, max_len):
        super().__init__()
        assert d_model % num_heads == 0
        self.h, self.dk = num_heads, d_model // num_heads
        self.W_q = nn.Parameter(torch.randn(d_model, d_model) / d_model ** 0.5)
        self.W_k = nn.Parameter(torch.randn(d_model, d_model) / d_model ** 0.5)
        self.W_v = nn.Parameter(torch.randn(d_model, d_model) / d_model ** 0.5)
        self.W_o = nn.Linear(d_model, d_model)
        freqs = 1.0 / (10000 ** (torch.arange(0, self.dk, 2).float() / self.dk))
        t = torch.arange(max_len).float()
        angles = torch.einsum("i,j->ij", t, freqs)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())
        self.register_buffer("causal", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), 1))

    def forward(self, x):
        b, n, _ = x.shape
        q = (x @ self.W_q).view(b, n, self.h, self.dk).transpose(1, 2)
        k = (x @ self.W_k).view(b, n, self.h, self.dk).transpose(1, 2)
        v = (x @ self.W_v).view(b, n, self.h, self.dk).transpose(1, 2)
        q = q * self.cos[:n] + rotate_every_two(q) * self.sin[:n]
        k = k * self.cos[:n] + rotate_every_two(k) * self.sin[:n]
        att = torch.einsum("bhid,bhjd->bhij", q, k) / self.dk ** 0.5
        att = att.masked_fill(self.causal[:n, :n], float("-inf")).softmax(-1)
        out = torch.einsum("bhij,bhjd->bhid", att, v)
        return self.W_o(out.transpose(1, 2).reshape(b, n, -1))


TARGET = "RopeAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = None  # no catalogued mistake is this one: reference-match fails by its numbers, and the line is told
LINE = 37
MUST_PASS = ("causal-leakage", "output-shape", "kv-cache")
