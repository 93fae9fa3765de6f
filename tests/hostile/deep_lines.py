"""Hostile: patches mha-check's worker in its own child so that every line of its code the trace records reads as
`- - - ... 1`, a minus 6,100 times (found by red team 15: the trusted parent parses the line a known mistake was
found on to write its one-line fix, and CPython's parser raises MemoryError on a line nested that deep, RecursionError
on `a[0][0]...`; neither was caught, so a single run crashed with a traceback and wrote no report at all, and in
`grade` the student's row was "grader error", needs review, in place of the failure).  Such a line is no Python the
parent can read now, as a SyntaxError is.  Wrong (scores never scaled), so it fails whatever its lines say."""
import sys

import torch
import torch.nn as nn

_recorders = sys.modules.get("harness.child.recorders")
if _recorders is not None:
    _recorders.code_at = lambda filename, lineno: "-" * 6100 + "1"


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
        b, n, _ = x.shape
        q, k, v = (w(x).view(b, n, self.h, self.dh).transpose(1, 2) for w in (self.W_query, self.W_key, self.W_value))
        scores = (q @ k.transpose(2, 3)).masked_fill(self.mask[:n, :n], float("-inf"))  # WRONG: never scaled
        ctx = self.dropout(torch.softmax(scores, dim=-1)) @ v
        return self.out_proj(ctx.transpose(1, 2).contiguous().view(b, n, self.h * self.dh))
