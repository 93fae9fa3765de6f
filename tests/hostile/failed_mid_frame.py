"""Hostile: answers the first Forward of every frame that holds several requests with a forged 'Failed' (a look-alike
class, so that the worker's loop goes on) and the rest of the frame normally: a failure in the middle of the
replies, as many replies as requests (found by an attacker's trial: an internal error of mha-check, "'Failed'
object has no attribute 'y'"); and is wrong.  A failure ends a frame: this is a corrupted channel."""
import dataclasses
import gc
import sys

import torch
import torch.nn as nn

_worker = sys.modules.get("harness.child.worker")
if _worker is not None:
    _messages = sys.modules["harness.wire.messages"]

    @dataclasses.dataclass
    class Failed(_messages.Reply):
        stage: str
        message: str
        notes: list = dataclasses.field(default_factory=list)

    Failed.__annotations__ = {"stage": str, "message": str, "notes": list[str]}
    for _found in [o for o in gc.get_objects() if isinstance(o, _worker.Worker)]:
        _honest = _found.answer

        def _answer(request, _honest=_honest):
            reply = _honest(request)
            caller = sys._getframe(1).f_locals
            requests, done = caller.get("requests"), caller.get("replies")
            if isinstance(request, _messages.Forward) and requests and done is not None and \
                    len(done) < len(requests) - 1 and not any(type(r).__name__ == "Failed" for r in done):
                return Failed("forward", "RuntimeError: forged in the middle")
            return reply

        _found.answer = _answer


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
        return self.attend(x) * 2
        return self.attend(x)
