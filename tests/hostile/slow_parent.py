"""Hostile: patches mha-check's worker in its own child so that the module's description offers the same reading
of its parameters 64 times and every way to call forward 16 times: 1,024 pairs, each tried by the parent against
the reference and the catalogued mistakes (found by red team 16: with 2,048 pairs, the most the parent accepts,
about 13 s of the parent's own work on a quiet machine, 96% of the run, counted on the child's time in all, which
then ran out with `--time-limit 5` while every forward took milliseconds: "time limit: your code did not finish
forward within 5 s in all").  The child's clock stops while the parent computes now.  Wrong (scores divided by the
head width), so no reading ends the search early and nothing it offers can pass it."""
import sys

import torch
import torch.nn as nn

_layouts = sys.modules.get("harness.child.layouts")
if _layouts is not None:
    _honest = _layouts.discover

    def _flooded(*args, _honest=_honest, **kwargs):
        found, problem = _honest(*args, **kwargs)
        return (found * 64 if found else found), problem

    _layouts.discover = _flooded
_calling = sys.modules.get("harness.child.calling")
if _calling is not None:
    _honest_styles = _calling.styles_for

    def _many(module, _honest_styles=_honest_styles):
        ways = _honest_styles(module)
        ways.styles[:] = ways.styles * 16
        return ways

    _calling.styles_for = _many
_worker = sys.modules.get("harness.child.worker")
if _worker is not None:  # past the worker's own cut (an honest worker offers no more than the parent accepts)
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
