"""Buggy: a LayerNorm of the student's own that normalises over the tokens AND the features
(F.layer_norm(x, x.shape[1:])), so every output sees the future through the mean and the variance.

Style: a pre-norm with a hand-written class named LayerNorm (a gain vector, `normalized_shape` taken as x.shape[1:]
where x.shape[-1:] was meant), then the lesson's layer with W_query / W_key / W_value / out_proj.  A module named like
a norm is switched off only when a probe shows it acts on each token alone and ignores its scale
(harness.child.norms): this one mixes the tokens, so it is never taken away, and causal-leakage sees the leak.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LayerNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.g = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return F.layer_norm(x, x.shape[1:]) * self.g  # BUG: over (n, d), the whole sequence, not x.shape[-1:]


class NormedMHA(nn.Module):
    def __init__(self, d_model, context_length, num_heads):
        super().__init__()
        assert d_model % num_heads == 0
        self.h, self.dh = num_heads, d_model // num_heads
        self.norm = LayerNorm(d_model)
        self.W_query = nn.Linear(d_model, d_model, bias=False)
        self.W_key = nn.Linear(d_model, d_model, bias=False)
        self.W_value = nn.Linear(d_model, d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, n, _ = x.shape
        x = self.norm(x)
        q, k, v = (w(x).view(b, n, self.h, self.dh).transpose(1, 2) for w in (self.W_query, self.W_key, self.W_value))
        s = (q @ k.transpose(2, 3)) / math.sqrt(self.dh)
        s = s.masked_fill(self.mask.bool()[:n, :n], -torch.inf)
        ctx = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).contiguous().view(b, n, -1)
        return self.out_proj(ctx)


TARGET = "NormedMHA"
EXPECT = ("causal-leakage",)
DIAGNOSIS = None
UNNAMED_OK = True
