"""Hostile: patches mha-check's worker in its own child so that every reply's texts are floods: each reading's `how`
and notes, what loading left out, a crash's words, each line the trace records, 150,000 characters each, as much as
a frame's header holds (found by red team 15, left open: the parent bounded only a reading's roles, at 8,192
characters, and read, parsed and printed every other text the child sent whole, on the time the student's limit
counts).  The parent refuses any text of a reply longer than its worker ever writes (8,192 characters; the honest
worker cuts a longer one, with a mark) as a corrupted channel.  Wrong (scores never scaled), so nothing it says can
pass it."""
import sys

import torch
import torch.nn as nn

FLOOD = "x raised (at a.py:1 in f: " * 6000  # 150,000 characters of what the parent's parsers look for

_messages = sys.modules.get("harness.wire.messages")
if _messages is not None:  # past the worker's own cut (an honest worker cuts every text longer than the parent takes)
    _messages._cut_texts = lambda value: value
_worker = sys.modules.get("harness.child.worker")
if _worker is not None:
    _honest = _worker.Worker.answer

    def _flooding(self, request, _honest=_honest):
        reply = _honest(self, request)
        for lay in getattr(reply, "layouts", None) or []:
            lay.how, lay.notes = FLOOD, [FLOOD]
        if hasattr(reply, "notes"):
            reply.notes = [FLOOD]
        if hasattr(reply, "message"):
            reply.message = "ValueError: " + FLOOD
        for line in getattr(reply, "lines", None) or []:
            line["code"] = FLOOD
        reply.__dict__.pop("_measured_fields", None)  # a description measured before: sent as it is now
        return reply

    _worker.Worker.answer = _flooding


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
