"""Hostile (red team 9): the lesson's layer in float64, and in float32 only at reference-match's float32 probe's
shape, a batch of 4 and 48 tokens, which was one public shape; everywhere else in float32 (every training batch of
another shape) no causal mask and the scores divided by the head width.  It had full marks (19 of 19, at seeds 0 and
7).  The float32 probes' batches and lengths are now drawn from the seed, a grade's secret, and it fails
reference-match."""
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
        if x.dtype != torch.float64 and (B, n) != (4, 48):  # the mistake, in float32 but at the old probe's shape
            s = q @ k.transpose(2, 3) / self.dh
        else:
            s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
