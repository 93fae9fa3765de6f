"""Correct, but only in the dtypes it was written for: its fill is looked up in a table by the scores' dtype, and the
table has no float64 entry (the pattern of Sockeye 3's masked attention, whose fill table holds float16, bfloat16
and float32 only).

mha-check compares every layer with the reference in float64, so every call raises KeyError; the same call on
float32 and half-precision copies runs (tests/realzoo/corext_attention_rope_keep_mask_arg.py, which runs in float32
alone, still fails).  That is a limit of mha-check's comparison, not a bug: cannot tell, saying so and what would let
mha-check check it.  (Before: FAIL, "your code raised KeyError", no known mistake matches.)
"""
import math

import torch
import torch.nn as nn

TARGET = "FillByDtype"
CANNOT_TELL = ("contiguity",)  # the first check to run a forward; every check after it needs its outcome
SAYS = ("float64 comparison", "runs on the same inputs in float32", "torch.finfo(scores.dtype).min")
ARG = None

LARGE_NEGATIVE = {torch.float16: -6.0e4, torch.bfloat16: -1.0e9, torch.float32: -1.0e9}


class FillByDtype(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.heads, self.width = num_heads, d_out // num_heads
        self.query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.output = nn.Linear(d_out, d_out)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("future", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def _heads(self, t):
        b, n, _ = t.shape
        return t.view(b, n, self.heads, self.width).transpose(1, 2)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        logits = q @ k.transpose(-2, -1) / math.sqrt(self.width)
        logits = logits.masked_fill(self.future[:n, :n], LARGE_NEGATIVE[logits.dtype])
        weights = self.drop(torch.softmax(logits, dim=-1))
        return self.output((weights @ v).transpose(1, 2).reshape(b, n, self.heads * self.width))
