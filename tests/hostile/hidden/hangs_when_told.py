"""Hostile (red team 13): the lesson's layer, with FILL as its causal fill, that sleeps at a forward only a leak's
search asks for (a batch of 2, 2 tokens, 1 feature: causal-leakage's look at the leak it found).

With causal-leakage hidden, the feedback `grade --feedback` writes said "marked for review: a person should look at
this report" for -1e4 (the hidden check ran into the time limit, cannot tell) and nothing for -inf: the hidden
check's result, told by the review line.  The student's view is marked for review by its shown checks alone.
`tests/e2e/test_hostile.py::test_what_the_code_does_tells_no_hidden_check`.
"""
import time

import torch
import torch.nn as nn

FILL = float("-inf")


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
        if tuple(x.shape) == (2, 2, 1):
            time.sleep(1000)
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], FILL)
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
