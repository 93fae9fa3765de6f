"""Forgeable (red team 15): a KV cache whose mask takes rows [:n] instead of [start:start + n] (each decoded token
sees no cached key but the first), and a worker patched to answer every decode with the layer's own full forward,
cache unused.  kv-cache compares the outputs the child reports for the cached decode with the parent's reference,
and the child computes them: a layer right without its cache passes it.  A documented gap: this obtains a passing
verdict (tests/e2e/test_hostile.py::test_forgeable_evidence); the same layer without the forgery fails kv-cache."""
import gc
import sys

import torch
import torch.nn as nn

_worker = sys.modules.get("harness.child.worker")
if _worker is not None:
    _messages = sys.modules["harness.wire.messages"]
    for _w in [o for o in gc.get_objects() if isinstance(o, _worker.Worker)]:
        _cached = _w.handlers[_messages.CacheRun]

        def _forged_cached(request, _cached=_cached, _w=_w):
            reply = _cached(request)
            if getattr(reply, "api", "") and not getattr(reply, "problem", ""):
                inst = _w._inst(request)
                with torch.no_grad():
                    y = inst["module"](_w._input(inst, request.x))  # the full forward: the cache never read
                reply.y, reply.grows, reply.raised, reply.raised_at = y.to(torch.float64).numpy(), True, "", -1
            return reply

        _w.handlers[_messages.CacheRun] = _forged_cached


class MyAttn(nn.Module):
    """Causal MHA with a key/value cache for generation: forward(x, use_cache=True) appends to the cache."""

    def __init__(self, d_model, n_heads, max_len, dropout=0.0):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.hd = n_heads, d_model // n_heads
        self.Wq = nn.Linear(d_model, d_model, bias=False)
        self.Wk = nn.Linear(d_model, d_model, bias=False)
        self.Wv = nn.Linear(d_model, d_model, bias=False)
        self.Wo = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), 1), persistent=False)
        self.k_cache = None
        self.v_cache = None
        self.pos = 0

    def reset_cache(self):
        self.k_cache, self.v_cache, self.pos = None, None, 0

    def forward(self, x, use_cache=False):
        B, n, d = x.shape
        sp = lambda t: t.view(B, n, self.n_heads, self.hd).transpose(1, 2)
        q, k, v = sp(self.Wq(x)), sp(self.Wk(x)), sp(self.Wv(x))
        if use_cache:
            if self.k_cache is not None:
                k = torch.cat([self.k_cache, k], dim=2)
                v = torch.cat([self.v_cache, v], dim=2)
            self.k_cache, self.v_cache = k, v
            self.pos += n
        total = k.shape[2]
        s = q @ k.transpose(2, 3) / self.hd ** 0.5
        s = s.masked_fill(self.mask[:n, :total], float("-inf"))  # WRONG with a cache: rows [:n], not offset
        w = self.drop(torch.softmax(s, dim=-1))
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)
        return self.Wo(ctx)
