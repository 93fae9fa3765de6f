"""Correct: a minGPT-derived layer configured by an object, its projections declared keys first, its mask buffer one
position longer than the block.

Stands for a real-code pattern (a reinforcement-learning port of minGPT, removed from tests/realzoo/ with the
provenance clean-up): a config class taking arbitrary keyword settings (n_embd, n_head, block_size, attn_pdrop,
resid_pdrop), the three projections created in the order key, query, value (so reading them by declaration order
swaps queries and keys), a lower-triangular mask registered for block_size + 1 positions and sliced to the input,
forward(x, layer_past=None) that ignores the past, attention and residual dropout.  Written here from that
description, in its own names.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Settings:
    """Holds whatever settings it is given, as attributes."""

    def __init__(self, block_size, **kwargs):
        self.block_size = block_size
        for name, value in kwargs.items():
            setattr(self, name, value)


class KeysFirstSelfAttention(nn.Module):
    def __init__(self, settings):
        super().__init__()
        assert settings.n_embd % settings.n_head == 0
        self.keys = nn.Linear(settings.n_embd, settings.n_embd)
        self.queries = nn.Linear(settings.n_embd, settings.n_embd)
        self.values = nn.Linear(settings.n_embd, settings.n_embd)
        self.attn_drop = nn.Dropout(settings.attn_pdrop)
        self.resid_drop = nn.Dropout(settings.resid_pdrop)
        self.out = nn.Linear(settings.n_embd, settings.n_embd)
        span = settings.block_size + 1
        self.register_buffer("lower", torch.tril(torch.ones(span, span)).view(1, 1, span, span))
        self.n_head = settings.n_head

    def forward(self, x, layer_past=None):
        B, T, C = x.size()
        hs = C // self.n_head
        k = self.keys(x).view(B, T, self.n_head, hs).transpose(1, 2)
        q = self.queries(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.values(x).view(B, T, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(self.lower[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.out(y))


TARGET = "KeysFirstSelfAttention"
EXPECT = ()
