"""Hostile: the lesson's layer, exactly right in float64 and wherever autograd is off, and wrong in float32 with
autograd on, which is every training step: no causal mask, and the scores divided by the head width instead of its
square root (red team 7).  reference-match's float32 probe in eval() mode runs without autograd and saw the lesson's
layer: full marks.  The probe now also runs the float32 module as a training step does (train() mode, dropout 0,
autograd on) and compares that output with the parent's own float64 reference."""
import torch
import torch.nn as nn


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
        if x.dtype != torch.float64 and torch.is_grad_enabled():  # the mistake, in every training step only
            s = q @ k.transpose(2, 3) / self.dh
        else:
            s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
