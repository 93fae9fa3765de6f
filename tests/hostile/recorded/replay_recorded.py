"""Hostile: full marks without a correct layer, by replaying answers recorded at home (issue 27).  mha-check is public
and, at its default seed, sends every run the same weights and inputs.  A student can therefore run it at home on a
correct layer with a recorder around mha-check's own exchange with its child (tests/e2e/test_seed.py's RECORDER),
keep every request with the answer given, and hand in a wrong layer (no causal mask, scores not scaled) with that
table beside it (replay_table.bin).  Handed in, this module patches the child's request handler: a request whose
key is in the table gets the recorded answer, any other the wrong layer's own.  The key (`Keys`) is what either side
of the exchange can compute: the request's fields and arrays, the instance's history (how it was built, every set
of weights written into it) and how many times the same request came before (dropout's answers differ each time).
Loading, building, reading and writing weights are answered for real (they hold paths and handles).  It passes
only where the weights and inputs are those of the recording: a grade whose seed the student cannot know sees the
wrong layer."""
import dataclasses
import hashlib
import os
import pickle
import sys
import zlib

import numpy as np
import torch
import torch.nn as nn

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "replay_table.bin")
ANSWERED = ("forward", "vjp", "jacobian", "meta", "devices", "trace", "cache")  # by the table when it has them


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

    def forward(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        w = self.dropout(torch.softmax(q @ k.transpose(2, 3), dim=-1))  # no mask, no scaling: wrong
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))


def _digest(request, *more) -> bytes:
    h = hashlib.sha256(request.op.encode())
    for f in dataclasses.fields(request):
        value = getattr(request, f.name)
        if f.name == "handle":
            continue
        if isinstance(value, np.ndarray):
            h.update(f"{f.name}{value.dtype}{value.shape}".encode() + np.ascontiguousarray(value).tobytes())
        elif isinstance(value, dict) and value and all(isinstance(v, np.ndarray) for v in value.values()):
            for name in sorted(value):
                h.update(name.encode() + np.ascontiguousarray(value[name]).tobytes())
        else:
            h.update(f"{f.name}={value!r}".encode())
    for part in more:
        h.update(part)
    return h.digest()


class Keys:
    """The table's keys, in the order requests come (one per process: the recorder keeps one per child)."""

    def __init__(self):
        self.history, self.seen = {}, {}

    def key(self, request, reply=None):
        """The key of an answered request (None for the others); a Build needs its reply (the handle it got)."""
        if request.op == "build":
            if reply is not None and hasattr(reply, "handle"):
                self.history[reply.handle] = [_digest(request)]
            return None
        if request.op == "write":
            self.history.setdefault(request.handle, []).append(_digest(request))
            return None
        if request.op not in ANSWERED:
            return None
        base = _digest(request, *self.history.get(getattr(request, "handle", None), []))
        self.seen[base] = self.seen.get(base, 0) + 1
        return hashlib.sha256(base + str(self.seen[base]).encode()).digest()


def _patch() -> None:
    worker = sys.modules.get("harness.child.worker")
    if worker is None or not os.path.exists(TABLE):
        return
    with open(TABLE, "rb") as f:
        table = pickle.loads(zlib.decompress(f.read()))
    real, keys = worker.Worker.answer, Keys()

    def answer(self, request):
        key = keys.key(request) if request.op != "build" else None
        if key is not None and key in table:
            return table[key]
        reply = real(self, request)
        if request.op == "build":
            keys.key(request, reply)
        return reply

    worker.Worker.answer = answer


_patch()
