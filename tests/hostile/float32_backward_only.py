"""Hostile (red team 9): the lesson's layer in every forward, float32 included, and a backward right in float64
only: a custom autograd Function on the output passes the upstream gradient on in float64 and its negative in
float32, gradient ascent in every training step.  gradient-match asked float64 only, and reference-match's float32
training step compared the output alone: full marks (19 of 19).  The float32 training step's gradients are now
compared too: with the reference's, and where they differ, with the module's own in float64."""
import torch
import torch.nn as nn


class _Grad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, y):
        return y.view_as(y)

    @staticmethod
    def backward(ctx, g):
        return g if g.dtype == torch.float64 else -g  # the mistake: gradient ascent in float32, every training step


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.h, self.dh = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return _Grad.apply(self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh)))
