"""Correct, CS336-style rotary attention whose forward wants the token positions as (B, n, 1), a layout mha-check
does not offer ((n,), (1, n) and (B, n) are): every call raises, which is mha-check's limit, not the student's bug, so
output-shape is cannot tell, naming the layouts tried and the factory that helps.

Style: q/k/v/out Linear, RoPE on interleaved pairs from cos/sin buffers indexed by the positions, SDPA is_causal.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "RoPESelfAttention"
CANNOT_TELL = ("output-shape",)
SAYS = ("token positions given as 0..n-1 in every layout", "(B, n)", "factory")
ARG = None


class RoPESelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, max_seq_len, theta=10000.0):
        super().__init__()
        assert d_model % num_heads == 0
        self.h, self.dk = num_heads, d_model // num_heads
        self.q, self.k, self.v = (nn.Linear(d_model, d_model, bias=False) for _ in range(3))
        self.out = nn.Linear(d_model, d_model)
        inv = theta ** (-torch.arange(0, self.dk, 2).float() / self.dk)
        ang = torch.arange(max_seq_len).float()[:, None] * inv[None, :]
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)

    def rope(self, t, pos):  # t (B, H, n, dk), pos (B, n)
        cos, sin = self.cos[pos][:, None].to(t.dtype), self.sin[pos][:, None].to(t.dtype)
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

    def forward(self, x, token_positions):
        if token_positions.dim() != 3:
            raise ValueError(f"token_positions must be (batch, seq, 1), got {tuple(token_positions.shape)}")
        pos = token_positions[..., 0]
        B, n, d = x.shape
        heads = lambda t: t.view(B, n, self.h, self.dk).transpose(1, 2)
        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        q, k = self.rope(q, pos), self.rope(k, pos)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(B, n, d))
