"""Hostile (red team 14): a layer that is right, but slow while the machine is loaded.  A wall-clock time-out is
the moment's (a neighbour that spins on every core, a busy grader), and `grade --resume` must not keep it: here the
moment is played by a file beside the layer, `hang_until.txt`, holding a time (seconds since the epoch) before which
the import sleeps past any time limit.  After that time the same files give the right layer."""
import os
import time

import torch
import torch.nn as nn

_until = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hang_until.txt")
if os.path.exists(_until):
    with open(_until) as f:
        deadline = float(f.read())
    while time.time() < deadline:
        time.sleep(0.2)


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
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # noqa: E731
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
