"""Forgeable: keeps its causal mask as a plain attribute (it stays on the CPU when the module moves, and is not
in the state_dict) and forges what its worker reports about itself: no plain tensor attributes, no container,
no tensor left behind when following devices.  mask-buffer and registered judge those self-reports.  A documented
gap: this obtains a passing verdict (tests/e2e/test_hostile.py::test_forgeable_evidence)."""
import gc
import sys

import torch
import torch.nn as nn

_worker = sys.modules.get("harness.child.worker")
if _worker is not None:
    _messages = sys.modules["harness.wire.messages"]
    for _w in [o for o in gc.get_objects() if isinstance(o, _worker.Worker)]:
        _build, _devices = _w.handlers[_messages.Build], _w.handlers[_messages.Devices]

        def _forged_build(request, _build=_build):
            built = _build(request)
            if hasattr(built, "plain_tensors"):
                built.plain_tensors, built.containers = [], []
                built.__dict__.pop(getattr(_messages, "MEASURED", ""), None)  # the encoding the size check kept
            return built

        def _forged_devices(request, _devices=_devices):
            return _messages.DevicesResult([], [])

        _w.handlers[_messages.Build], _w.handlers[_messages.Devices] = _forged_build, _forged_devices


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
        self.mask = torch.triu(torch.ones(context_length, context_length), 1).bool()  # not a buffer

    def forward(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
