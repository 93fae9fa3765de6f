"""Hostile: the lesson's layer, exactly right in float64 and wrong in float32, the dtype a layer is trained in: fed a
float32 input it drops the causal mask and divides the scores by the head width instead of its square root.  A
probe that only ever sends float64 sees the lesson's layer in every check; only a comparison of its float32 answer
with the parent's own float64 reference shows the mistake (relative differences of 0.02 and more, where float32
rounding of the lesson's layer stays below 1e-6).  The same branch could be written by accident: a mask or a fill
value made for one dtype, a constant of the wrong precision."""
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
        if x.dtype == torch.float32:  # the mistake, only where mha-check never looked: no mask, the wrong scale
            s = q @ k.transpose(2, 3) / self.dh
        else:
            s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
