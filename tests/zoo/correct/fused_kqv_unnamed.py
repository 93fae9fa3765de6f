"""Correct: one fused projection with no role in its name (`self.a`), holding keys, queries and values in that
order, and an output projection `self.b`.

Style: `chunk(3)` unpacked as k, q, v, SDPA with is_causal.  Nothing says the blocks are [Q; K; V], so each order of
the blocks is a plausible reading; under the [K; Q; V] one the reference reproduces the module.
"""
import torch.nn as nn
import torch.nn.functional as F

TARGET = "FusedAttention"
EXPECT = ()


class FusedAttention(nn.Module):
    def __init__(self, d, heads, context_length=64):
        super().__init__()
        if d % heads:
            raise ValueError("d must be divisible by heads")
        self.h = heads
        self.a = nn.Linear(d, 3 * d, bias=False)
        self.b = nn.Linear(d, d)

    def forward(self, x):
        b, t, e = x.shape
        k, q, v = (z.view(b, t, self.h, e // self.h).transpose(1, 2) for z in self.a(x).chunk(3, dim=-1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.b(y.transpose(1, 2).reshape(b, t, e))
