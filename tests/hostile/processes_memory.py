"""Hostile: four processes forked at import, each touching 1000 MB: under the suite's --memory-mb 1500 each one is
within the kernel's limits (they hold one process alone), 4 GB together, more than one process may take even under
the default 3072 MB (red team 6: 4.7 GB under --memory-mb 1024, with full marks); and a correct layer, so only the
memory stop keeps it from passing."""
import os
import time

import torch
import torch.nn as nn

HELPERS = []
FILLED, TOLD = os.pipe()
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        block = bytearray(1000 << 20)
        for i in range(0, len(block), 4096):  # touched: resident, not just reserved
            block[i] = 1
        os.write(TOLD, b"!")
        time.sleep(120)
        os._exit(0)
    HELPERS.append(pid)
for _ in HELPERS:  # the import ends once all of it is held: the checks then run beside 4 GB
    os.read(FILLED, 1)


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
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
