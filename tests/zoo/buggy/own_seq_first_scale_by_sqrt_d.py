"""Buggy (student style, scale-by-sqrt-d): a SEQUENCE-FIRST layer, (seq_len, batch, embed_dim) in and out, whose
scores are divided by sqrt(embed_dim), the full width, instead of sqrt(head_dim) (a student's trial: driven as
(B, n, d) it was named batch-seq-swap, a mistake it does not have, and its real one was never told).

Style: q_proj / k_proj / v_proj / out_proj, a `batch_first=False` constructor flag it asserts, view(T, B, H, hd)
then permute(1, 2, 0, 3), an additive float mask buffer of -inf above the diagonal.
"""
import math

import torch
import torch.nn as nn


class SeqFirstSelfAttention(nn.Module):
    """Input is (seq_len, batch, embed_dim), like nn.MultiheadAttention with batch_first=False."""

    def __init__(self, embed_dim, num_heads, max_len=512, batch_first=False):
        super().__init__()
        assert not batch_first, "this layer only supports (T, B, E)"
        assert embed_dim % num_heads == 0
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.register_buffer("causal", torch.full((max_len, max_len), float("-inf")).triu(1))

    def forward(self, x):
        T, B, E = x.shape
        # (T, B, E) -> (B, H, T, hd)
        q = self.q_proj(x).view(T, B, self.num_heads, self.head_dim).permute(1, 2, 0, 3)
        k = self.k_proj(x).view(T, B, self.num_heads, self.head_dim).permute(1, 2, 0, 3)
        v = self.v_proj(x).view(T, B, self.num_heads, self.head_dim).permute(1, 2, 0, 3)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.embed_dim)
        scores = scores + self.causal[:T, :T]
        probs = torch.softmax(scores, dim=-1)
        ctx = (probs @ v).permute(2, 0, 1, 3).reshape(T, B, E)
        return self.out_proj(ctx)


TARGET = "SeqFirstSelfAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-by-sqrt-d"
LINE = 36
