"""Correct: CS336-style rotary attention with forward(x, token_positions) and a RoPE submodule that stacks the pairs.

Written for issue 31 by the integrator as a held-out set (each proven correct or buggy against an independent float64
reference before mha-check was run on it), then kept here. The divisibility check was added, and
the output projection given a bias (CS336 leaves it out), so that every lesson rule holds.
"""
import torch
import torch.nn as nn

TARGET = "MultiHeadSelfAttentionWithRoPE"


class RotaryEmbedding(nn.Module):
    def __init__(self, theta, d_k, max_seq_len):
        super().__init__()
        inv = theta ** (-torch.arange(0, d_k, 2).float() / d_k)
        ang = torch.arange(max_seq_len).float()[:, None] * inv[None, :]
        self.register_buffer("c", ang.cos(), persistent=False)
        self.register_buffer("s", ang.sin(), persistent=False)

    def forward(self, x, token_positions):
        c, s = self.c[token_positions], self.s[token_positions]  # (..., n, d_k/2)
        x1, x2 = x[..., 0::2], x[..., 1::2]
        out = torch.stack([x1 * c - x2 * s, x1 * s + x2 * c], dim=-1)
        return out.flatten(-2)


class MultiHeadSelfAttentionWithRoPE(nn.Module):
    def __init__(self, d_model, num_heads, max_seq_len, theta=10000.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("the width must be divisible by the number of heads")
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.output_proj = nn.Linear(d_model, d_model)
        self.rope = RotaryEmbedding(theta, self.d_k, max_seq_len)

    def forward(self, x, token_positions):
        *lead, n, d = x.shape
        split = lambda t: t.view(*lead, n, self.num_heads, self.d_k).transpose(-2, -3)
        q, k, v = split(self.q_proj(x)), split(self.k_proj(x)), split(self.v_proj(x))
        q = self.rope(q, token_positions.unsqueeze(-2) if token_positions.dim() > 1 else token_positions)
        k = self.rope(k, token_positions.unsqueeze(-2) if token_positions.dim() > 1 else token_positions)
        scores = q @ k.transpose(-1, -2) / self.d_k ** 0.5
        causal = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.output_proj(out.transpose(-2, -3).reshape(*lead, n, d))
