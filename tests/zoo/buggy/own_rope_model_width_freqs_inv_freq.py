"""Buggy (trial8, 2026-12-07): a Llama-style rotary layer (rotate_half, cos and sin tables as buffers, q_proj, k_proj,
v_proj, o_proj) whose frequencies' exponent is divided by the model width: `torch.arange(0, self.head_dim, 2) /
d_model`.  Named right at its line; its fix was the remedy in words ("compute the rotary frequencies from the head
width"), where the line corrected, divided by the width its arange runs to, says it and makes the layer pass.

Style: Hugging Face Llama's rotary embedding written by hand, inv_freq from theta, a (context, dh) table.
"""
import torch
import torch.nn as nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotaryMHA(nn.Module):
    def __init__(self, d_model, num_heads, context_length, theta=10000.0):
        super().__init__()
        assert d_model % num_heads == 0, "d_model must be divisible by num_heads"
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.o_proj = nn.Linear(d_model, d_model)
        inv_freq = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2).float() / d_model))
        t = torch.arange(context_length).float()
        freqs = torch.outer(t, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        b, n, d = x.shape
        q = self.q_proj(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.cos[:n].to(q.dtype), self.sin[:n].to(q.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = q @ k.transpose(-2, -1) / self.head_dim ** 0.5
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        out = (w @ v).transpose(1, 2).reshape(b, n, d)
        return self.o_proj(out)


TARGET = "RotaryMHA"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "rope-model-width-freqs"
LINE = 27
