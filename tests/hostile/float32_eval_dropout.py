"""Hostile (red team 9): the lesson's layer, with its attention weights' dropout applied in eval() mode too when the
module is float32 (F.dropout(..., training=self.training or x.dtype != torch.float64)): a float32 model in eval(),
generating text, draws a different answer every call.  eval-determinism asks float64 only, and every float32 module
mha-check built had dropout 0: full marks (19 of 19).  The float32 eval() probe's module is built with dropout 0.5
now, and reference-match says that dropout stays on in eval() in float32 only."""
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
        if True:
            s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(s, dim=-1)
        on = self.training or x.dtype != torch.float64  # the mistake: dropout in eval() too, in float32
        w = torch.nn.functional.dropout(w, self.dropout.p, training=on)
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
