"""Correct: rotary attention in the paper's pairing (x0, x1), (x2, x3), rotated as complex numbers in float64.

Written for issue 31 by the integrator as a held-out set (each proven correct or buggy against an independent float64
reference before mha-check was run on it), then kept here. The divisibility check was added so that every
lesson rule holds.
"""
import math
import torch
import torch.nn as nn

TARGET = "RotaryCausalAttention"


class RotaryCausalAttention(nn.Module):
    """RoPE in the paper's pairing: (x0, x1), (x2, x3), ... rotated as complex numbers."""

    def __init__(self, d_model, n_heads, seq_len, theta=10000.0):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("the width must be divisible by the number of heads")
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.to_q = nn.Linear(d_model, d_model, bias=False)
        self.to_k = nn.Linear(d_model, d_model, bias=False)
        self.to_v = nn.Linear(d_model, d_model, bias=False)
        self.to_out = nn.Linear(d_model, d_model)
        freqs = 1.0 / theta ** (torch.arange(0, self.d_head, 2).double() / self.d_head)
        angles = torch.outer(torch.arange(seq_len).double(), freqs)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles), persistent=False)
        self.register_buffer("future", torch.triu(torch.ones(seq_len, seq_len, dtype=torch.bool), 1), persistent=False)

    def rotate(self, t):
        n = t.shape[2]
        tc = torch.view_as_complex(t.to(torch.float64).reshape(*t.shape[:-1], -1, 2))
        out = torch.view_as_real(tc * self.freqs_cis[:n]).flatten(-2)
        return out.to(t.dtype)

    def forward(self, x):
        b, n, _ = x.shape
        heads = lambda t: t.reshape(b, n, self.n_heads, self.d_head).transpose(1, 2)
        q, k, v = heads(self.to_q(x)), heads(self.to_k(x)), heads(self.to_v(x))
        q, k = self.rotate(q), self.rotate(k)
        s = q @ k.transpose(-1, -2) / math.sqrt(self.d_head)
        s = s.masked_fill(self.future[:n, :n], float("-inf"))
        o = s.softmax(-1) @ v
        return self.to_out(o.transpose(1, 2).reshape(b, n, -1))
