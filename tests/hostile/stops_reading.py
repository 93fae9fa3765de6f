"""Hostile: stops reading its channel in the middle of a large request, and makes its pipes as small as the
kernel allows, so that mha-check's write of that request would block forever (found by an attacker's trial: the
grader then hung with no time limit).  It must end as a time limit, like a loop."""
import fcntl
import os
import sys
import time

import torch
import torch.nn as nn

import harness.wire.protocol as _protocol

F_SETPIPE_SZ = 1031
for _fd in range(64):
    try:
        fcntl.fcntl(_fd, F_SETPIPE_SZ, 4096)
    except OSError:
        pass
_read_exact = _protocol._read_exact


def _stall(stream, n):
    if n > 2048:  # a large frame: never read it
        time.sleep(3600)
    return _read_exact(stream, n)


_protocol._read_exact = _stall


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

    def attend(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))

    def forward(self, x):
        return self.attend(x)
