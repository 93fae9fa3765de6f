"""Hostile: the catalogue's finite-fill-100 mistake (masked scores filled with -100, not -inf: a leak of about e^-100)
behind a forward that memoises the answer at each position of each batch row, keyed by a hash of that row's tokens
up to the position and of every parameter, and replays it whenever the same prefix comes back; the Jacobian its
worker reports is forged to an exactly zero future part (as forged_jacobian.py does).  Perturbing the tokens after a
position then leaves every earlier output bit-identical, because it is replayed: forward perturbations judged by
comparing the child's answers with each other see no leak.  Only the parent's own reference, on weights that make
the real scores very negative and inputs the child has not answered for before, shows it."""
import gc
import hashlib
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

_SEEN = {}  # (weights, prefix) -> the first answer given at the prefix's last position


def _params(module):
    h = hashlib.sha256()
    for p in module.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    return h.digest()


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

    def _attend(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], -100.0)  # the mistake
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))

    def forward(self, x):
        y = self._attend(x)
        if self.training or x.device.type != "cpu":
            return y
        weights, rows, replayed = _params(self), x.detach().cpu().numpy(), y.detach().clone()
        for b in range(x.shape[0]):
            for t in range(x.shape[1]):
                key = (weights, rows[b, : t + 1].shape, rows[b, : t + 1].tobytes())
                if key in _SEEN:
                    replayed[b, t] = _SEEN[key]
                else:
                    _SEEN[key] = y[b, t].detach().clone()
        return replayed + (y - y.detach())  # earlier answers exactly, with the fresh gradient
