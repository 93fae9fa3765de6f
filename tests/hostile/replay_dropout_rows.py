"""Hostile: the catalogue's dropout-in-eval mistake (F.dropout(w, p, training=True), on after model.eval()) behind a
forward that memoises each batch row's answer, keyed by a hash of that row's bytes and of every parameter, in a
table shared by every instance: a row seen before, in whatever batch and position of the batch, gets its earlier
answer back (its gradient left to the fresh computation).  Repeated passes and a dropout-free twin given the same
weights then agree row by row; only the parent's own reference, on weights and rows the child has not answered for
before, shows the mistake."""
import hashlib

import torch
import torch.nn as nn

_SEEN = {}  # row key -> the first answer given for that row


def _params(module):
    h = hashlib.sha256()
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
        weights, rows, replayed = _params(self), x.detach().cpu().numpy(), y.detach().clone()
        for b in range(x.shape[0]):
            key = (weights, rows[b].shape, rows[b].tobytes())
            if key in _SEEN:
                replayed[b] = _SEEN[key]
            else:
                _SEEN[key] = y[b].detach().clone()
        return replayed + (y - y.detach())  # earlier answers exactly, with the fresh gradient
