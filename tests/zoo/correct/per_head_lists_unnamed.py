"""Correct: one nn.ModuleList per projection, each of one nn.Linear(d_in, d_out // heads) a head, named `a`, `b`,
`c`: names that say no role (issue 28 item 1; `per_head_lists_by_role.py` is the same layout named q/k/v).

Style: a student's loop over zip(self.a, self.b, self.c), the values' list declared first (`a` the values, `b` the
queries, `c` the keys), separate d_in and d_out, biases on the projections, a boolean `triu` mask buffer filled with
-inf, the heads concatenated in order and projected by `self.o = nn.Linear(d_out, d_out)`.  No name says which list
is which: every order of the three lists is a reading, and the proof finds the one that reproduces the output.
"""
import math

import torch
import torch.nn as nn


class ListsOfHeads(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads):
        super().__init__()
        if d_out % num_heads:
            raise ValueError("d_out must be divisible by num_heads")
        self.dh = d_out // num_heads
        self.a = nn.ModuleList(nn.Linear(d_in, self.dh) for _ in range(num_heads))
        self.b = nn.ModuleList(nn.Linear(d_in, self.dh) for _ in range(num_heads))
        self.c = nn.ModuleList(nn.Linear(d_in, self.dh) for _ in range(num_heads))
        self.o = nn.Linear(d_out, d_out)
        self.register_buffer("future", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        n = x.shape[1]
        outs = []
        for to_v, to_q, to_k in zip(self.a, self.b, self.c):
            scores = to_q(x) @ to_k(x).transpose(1, 2) / math.sqrt(self.dh)
            scores = scores.masked_fill(self.future[:n, :n], float("-inf"))
            outs.append(torch.softmax(scores, dim=-1) @ to_v(x))
        return self.o(torch.cat(outs, dim=-1))


TARGET = "ListsOfHeads"
EXPECT = ()
