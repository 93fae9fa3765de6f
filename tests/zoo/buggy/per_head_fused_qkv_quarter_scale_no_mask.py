"""Buggy for a causal layer: a text-encoder attention with a per-head fused projection, q and k each scaled by
dh ** -0.25, a parameter-free inner attention module, a float32 softmax - and no mask at all.

Stands for a real-code pattern (the caption encoder of an image-generation model, "adapted from CLIP ViT", removed
from tests/realzoo/ with the provenance clean-up): MultiheadAttention(n_ctx, width, heads) = one fused Linear of
3 * width viewed (B, n, H, 3 * dh) and chunked per head ([q_h; k_h; v_h] rows, the Megatron layout), an inner
module holding no parameters that scales q and k by 1 / sqrt(sqrt(dh)) each before one einsum and softmaxes in
float32, then an output Linear.  It encodes the caption bidirectionally by design; as a causal layer it has no
mask.  Written here from that description, in its own names.

Mistake (for the lesson's causal layer): no causal mask.
"""
import math

import torch
import torch.nn as nn


class PlainAttend(nn.Module):
    def __init__(self, n_heads, n_ctx):
        super().__init__()
        self.n_heads = n_heads
        self.n_ctx = n_ctx

    def forward(self, packed):
        bs, n_ctx, width = packed.shape
        dh = width // self.n_heads // 3
        s = 1 / math.sqrt(math.sqrt(dh))
        packed = packed.view(bs, n_ctx, self.n_heads, -1)
        q, k, v = torch.split(packed, dh, dim=-1)
        w = torch.einsum("bthc,bshc->bhts", q * s, k * s)
        w = torch.softmax(w.float(), dim=-1).type(w.dtype)
        return torch.einsum("bhts,bshc->bthc", w, v).reshape(bs, n_ctx, -1)


class CaptionSelfAttention(nn.Module):
    def __init__(self, n_ctx, width, heads):
        super().__init__()
        self.n_ctx, self.width, self.heads = n_ctx, width, heads
        self.packed_proj = nn.Linear(width, width * 3)
        self.out_proj = nn.Linear(width, width)
        self.inner = PlainAttend(heads, n_ctx)

    def forward(self, x):
        return self.out_proj(self.inner(self.packed_proj(x)))


TARGET = "CaptionSelfAttention"
EXPECT = ("causal-leakage",)
DIAGNOSIS = "no-mask"
