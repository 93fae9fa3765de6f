"""Correct, with the causal mask left to the caller: forward(x, future_mask=None), as encoder/decoder code writes it.

Style: a decoder block's self-attention from a from-scratch transformer course: the mask is built by the caller
(True = a future position) and passed under a name of the author's own. From a real-code trial: a mask parameter
named outside mha-check's list was never passed, the unmasked numbers matched the no-mask mistake, and a correct
layer was told "Causal mask never applied". Any parameter named like a mask (not a padding mask) is offered one
now, and the proof decides the convention.
"""
import math

import torch
import torch.nn as nn


class DecoderSelfAttention(nn.Module):
    def __init__(self, hidden_dim, num_heads, max_len=64):
        super().__init__()
        assert hidden_dim % num_heads == 0, "hidden_dim must be divisible by num_heads"
        self.num_heads, self.head_dim = num_heads, hidden_dim // num_heads
        self.qkv_proj = nn.ModuleDict({r: nn.Linear(hidden_dim, hidden_dim, bias=False) for r in ("q", "k", "v")})
        self.o_proj = nn.Linear(hidden_dim, hidden_dim)

    def _heads(self, t):
        b, n, _ = t.shape
        return t.reshape(b, n, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x, future_mask=None):
        b, n, d = x.shape
        q, k, v = (self._heads(self.qkv_proj[r](x)) for r in ("q", "k", "v"))
        logits = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if future_mask is not None:
            logits = logits.masked_fill(future_mask, float("-inf"))
        out = torch.matmul(logits.softmax(dim=-1), v)
        return self.o_proj(out.permute(0, 2, 1, 3).reshape(b, n, d))


TARGET = "DecoderSelfAttention"
EXPECT = ()
