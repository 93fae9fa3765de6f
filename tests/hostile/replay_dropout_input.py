"""Hostile: the catalogue's dropout-in-eval mistake (F.dropout(w, p, training=True), on after model.eval()) behind a
forward that memoises its answers, keyed by a hash of the input's bytes and of every parameter, in a table shared
by every instance, and replays an earlier answer for the same key (its gradient left to the fresh computation).
Two passes on the same input then agree, and so do a module with dropout and one without, given the same weights
and input: a check that compares the child's answers with each other sees no dropout.  Only a comparison with the
parent's own reference, on weights and inputs the child has not answered for before, shows the mistake."""
import hashlib

import torch
import torch.nn as nn

_SEEN = {}  # key -> the first answer given for it, whichever module gave it


def _key(module, x):
    h = hashlib.sha256(repr(tuple(x.shape)).encode() + x.detach().cpu().numpy().tobytes())
    for p in module.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    return h.digest()


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.h, self.dh, self.p = num_heads, d_out // num_heads, dropout
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def _attend(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = nn.functional.dropout(torch.softmax(s, dim=-1), self.p, training=True)  # the mistake: on in eval()
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))

    def forward(self, x):
        y = self._attend(x)
        if self.training or x.device.type != "cpu":
            return y
        key = _key(self, x)
        if key not in _SEEN:
            _SEEN[key] = y.detach().clone()
            return y
        return _SEEN[key] + (y - y.detach())  # the earlier answer exactly, with the fresh gradient
