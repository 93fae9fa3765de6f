"""Correct: a SEQUENCE-FIRST layer (T, B, E) whose causal mask is the caller's and required: forward(src,
src_mask) with an additive float mask (T, T), -inf above the diagonal, as nn.Transformer's
generate_square_subsequent_mask makes it.

Style: a fairseq-like self-attention, one fused in_proj Linear(E, 3E) viewed (T, B, 3, H, dh), einsum over the
sequence-first axes ('tbhd,sbhd->bhts'), no mask buffer and no default for the mask.  Issue 28: called with x
batch first every style raised (the (n, n) mask meets the batch axis), and the correct layer was told "your forward
raised" (output-shape FAIL); the styles are now tried sequence first too, and the proof decides.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class SeqFirstMaskedSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.h, self.dh = num_heads, embed_dim // num_heads
        self.in_proj = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, src, src_mask):
        t, b, e = src.shape
        q, k, v = self.in_proj(src).view(t, b, 3, self.h, self.dh).unbind(2)
        scores = torch.einsum("tbhd,sbhd->bhts", q, k) / math.sqrt(self.dh) + src_mask
        out = torch.einsum("bhts,sbhd->tbhd", F.softmax(scores, dim=-1), v)
        return self.out_proj(out.reshape(t, b, e))


TARGET = "SeqFirstMaskedSelfAttention"
EXPECT = ()
