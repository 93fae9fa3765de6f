"""Buggy: the "Attention Is All You Need" layer that forgets its output projection, heads folded into the batch
head-major, causal only through a boolean mask argument.

Stands for a real-code pattern (an attention library of CS224n-style layers, removed from tests/realzoo/ with the
provenance clean-up): the class docstring promises Concat(head_1, ..., head_h) W_o, but forward returns the
concatenation itself; q, k and v are split with view(B, n, H, dh), then permuted to (H, B, n, dh) and flattened to
(H * B, n, dh), so the batch index runs fastest inside each head; the caller passes a (B, n, n) boolean mask, True
on the positions to hide, which the layer tiles over the heads with repeat(H, 1, 1) (a (1, n, n) mask therefore
only fits B = 1).  Written here from that description, in its own names.

Mistake: no output projection (W_o missing).  Everything else is the lesson's math under the mask argument.
"""
import math

import torch
import torch.nn as nn


class FoldedHeadsAttention(nn.Module):
    """Multi-head attention: heads = softmax(q k^T / sqrt(dh)) v per head, output Concat(heads) W_o."""

    def __init__(self, d_model, n_heads):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be a multiple of n_heads"
        self.n_heads = n_heads
        self.dh = d_model // n_heads
        self.to_q = nn.Linear(d_model, d_model)
        self.to_k = nn.Linear(d_model, d_model)
        self.to_v = nn.Linear(d_model, d_model)

    def _fold(self, t):
        b, n, _ = t.shape
        t = t.view(b, n, self.n_heads, self.dh).permute(2, 0, 1, 3)  # (H, B, n, dh)
        return t.reshape(self.n_heads * b, n, self.dh)

    def forward(self, query, key, value, mask=None):
        b, n, _ = query.shape
        q, k, v = self._fold(self.to_q(query)), self._fold(self.to_k(key)), self._fold(self.to_v(value))
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(self.dh)
        if mask is not None:
            scores = scores.masked_fill(mask.repeat(self.n_heads, 1, 1), float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        ctx = torch.bmm(weights, v)                                   # (H * B, n, dh)
        ctx = ctx.view(self.n_heads, b, n, self.dh).permute(1, 2, 0, 3)
        return ctx.reshape(b, n, self.n_heads * self.dh)              # the concatenation, never times W_o


TARGET = "FoldedHeadsAttention"
EXPECT = ("param-count",)
DIAGNOSIS = "no-output-projection"
