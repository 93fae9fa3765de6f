"""Buggy: the causal mask is made lazily in forward, on the input's device (device= is given), and cached in a
plain attribute `self._mask` for later calls: the cache is not a buffer, so after module.to(device) the cached mask
stays where it was made and forward fails with a device mismatch.  It is not mask-no-device (the mask IS made with
device=; a student's trial: that fix applied, the report still named mask-no-device), and not exactly
mask-plain-attribute (nothing is stored in __init__, so the module's registered state is complete when built).

Style: a fused qkv Linear split with .split(E, dim=-1), `nh` / `hd`, a helper `_causal(n, device)` that builds the
mask the first time it sees a longer sequence.
"""
import math

import torch
import torch.nn as nn


class LazyCausalMHA(nn.Module):
    """Builds its causal mask the first time it sees a longer sequence, and keeps it."""

    def __init__(self, embed_dim, num_heads):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.nh = num_heads
        self.hd = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)
        self._mask = None

    def _causal(self, n, device):
        if self._mask is None or self._mask.size(0) < n:
            self._mask = torch.triu(torch.ones(n, n, dtype=torch.bool, device=device), diagonal=1)
        return self._mask[:n, :n]

    def forward(self, x):
        B, N, E = x.shape
        q, k, v = self.qkv(x).split(E, dim=-1)
        q = q.view(B, N, self.nh, self.hd).transpose(1, 2)
        k = k.view(B, N, self.nh, self.hd).transpose(1, 2)
        v = v.view(B, N, self.nh, self.hd).transpose(1, 2)
        att = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(self.hd))
        att = att.masked_fill(self._causal(N, x.device), float("-inf"))
        att = att.softmax(-1)
        out = (att @ v).transpose(1, 2).reshape(B, N, E)
        return self.proj(out)


TARGET = "LazyCausalMHA"
EXPECT = ("mask-buffer",)
DIAGNOSIS = "mask-plain-attribute"  # the nearest mutant (its remedy, register_buffer, is this layer's fix)
UNNAMED_OK = True  # never mask-no-device: the mask is made with device=
