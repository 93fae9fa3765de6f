"""Buggy (mask-no-device): the causal mask is made lazily in forward with torch.ones(n, n) and no device=, then kept
in a buffer registered as None in __init__.  Once made, the buffer moves with the module; but a module moved to the
GPU before its first forward makes the mask on the CPU there, and fails (a student's trial: after the report's
advice to register the cache as a buffer, mha-check passed this layer, its device checks having run on an instance
whose mask an earlier forward had made).

Style: a fused qkv Linear split with .split(E, dim=-1), `nh` / `hd`, a helper `_causal(n)` that builds the mask the
first time it sees a longer sequence.
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
        self.register_buffer("_mask", None, persistent=False)

    def _causal(self, n):
        if self._mask is None or self._mask.size(0) < n:
            self._mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
        return self._mask[:n, :n]

    def forward(self, x):
        B, N, E = x.shape
        q, k, v = self.qkv(x).split(E, dim=-1)
        q = q.view(B, N, self.nh, self.hd).transpose(1, 2)
        k = k.view(B, N, self.nh, self.hd).transpose(1, 2)
        v = v.view(B, N, self.nh, self.hd).transpose(1, 2)
        att = q @ k.transpose(-1, -2) * (1.0 / math.sqrt(self.hd))
        att = att.masked_fill(self._causal(N), float("-inf"))
        att = att.softmax(-1)
        out = (att @ v).transpose(1, 2).reshape(B, N, E)
        return self.proj(out)


TARGET = "LazyCausalMHA"
EXPECT = ("mask-buffer",)
DIAGNOSIS = "mask-no-device"
