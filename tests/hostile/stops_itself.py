"""Hostile: stops its own process (SIGSTOP) in the first forward of every process, and is wrong.  Found stopped at
the time limit, the check is run once more in a fresh process, which stops too: mha-check's parent then read the
dead child's signature for the report and crashed with a traceback, and under `grade` the unpicklable WorkerDied
broke the whole pool (classmates in flight graded again, and after four breaks given "could not grade" rows)."""
import os
import sys
import time

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

    def attend(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))

    def forward(self, x):
        import signal
        if not getattr(MyAttn, "stopped", False):  # once in each process: a fresh one stops again
            MyAttn.stopped = True
            os.kill(os.getpid(), signal.SIGSTOP)
        return self.attend(x) * 2
