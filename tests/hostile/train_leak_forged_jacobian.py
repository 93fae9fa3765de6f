"""Hostile: attends to the future in train() mode only (the mask is applied in eval only) and forges the
Jacobian its worker reports (an exactly zero future part).  causal-leakage's train-mode evidence is that
self-reported gradient, and the parent's forward perturbations run in eval mode: a documented gap, with a passing
verdict, until reference-match's float32 probe also ran the layer as a training step does (train() mode, autograd
on) against the parent's own reference, which its output in training does not match: reference-match fails."""
import gc
import sys

import torch
import torch.nn as nn

_worker = sys.modules.get("harness.child.worker")
if _worker is not None:
    _messages = sys.modules["harness.wire.messages"]
    for _w in [o for o in gc.get_objects() if isinstance(o, _worker.Worker)]:
        _honest = _w.handlers[_messages.Jacobian]

        def _forged(request, _honest=_honest):
            result = _honest(request)
            if getattr(result, "jac", None) is not None:
                n = result.jac.shape[1]
                for t in range(n):
                    result.jac[:, t, :, t + 1:] = 0.0  # nothing after t influences output t, says the child
            return result

        _w.handlers[_messages.Jacobian] = _forged


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
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = q @ k.transpose(2, 3) / self.dh ** 0.5
        if not self.training:
            s = s.masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
