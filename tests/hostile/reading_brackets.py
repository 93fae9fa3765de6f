"""Hostile: patches mha-check's worker in its own child so that the first reading of its parameters says W_q is
read from `W_query.weight` and a piece of 800,000 `[`s (found by red team 15: the trusted parent named each reading's
parameters with `re.sub(r"\[.*?\]", ...)`, whose time is quadratic in a piece without `]`, about 250 times a run:
40,000 held it for five minutes, 800,000, which fit in a module's description, for days, and the time was told as
the student's own time limit).  The parent names the parameter in linear time now, and refuses a reading longer
than its worker ever writes as a corrupted channel.  Wrong (scores divided by the head width), so nothing it says
can pass it."""
import sys

import torch
import torch.nn as nn

_layouts = sys.modules.get("harness.child.layouts")
if _layouts is not None:
    _honest = _layouts.Layout.describe

    def _bracketed(self, _honest=_honest):
        roles = dict(_honest(self))
        roles["wq"] = roles["wq"] + " + " + "[" * 800_000
        return roles

    _layouts.Layout.describe = _bracketed
_messages = sys.modules.get("harness.wire.messages")
if _messages is not None:  # past the cut of every text a worker sends (red team 16: MAX_TEXT, also 8,192 characters)
    _messages._cut_texts = lambda value: value
_worker = sys.modules.get("harness.child.worker")
if _worker is not None:  # past the worker's own cut (an honest worker offers no reading longer than the parent takes)
    _worker._within_bounds = lambda found, ways: found


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
        scores = (q @ k.transpose(2, 3) / self.dh).masked_fill(self.mask[:n, :n], float("-inf"))  # WRONG: dh
        ctx = self.dropout(torch.softmax(scores, dim=-1)) @ v
        return self.out_proj(ctx.transpose(1, 2).contiguous().view(b, n, self.h * self.dh))
