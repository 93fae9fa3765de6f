"""Correct: a SEQUENCE-FIRST layer, input and output (seq_len, batch, embed_dim) as nn.MultiheadAttention with
batch_first=False; heads split with view(T, B, H, hd).permute(1, 2, 0, 3), merged back with permute(2, 0, 1, 3).
mha-check calls it with x transposed to (n, B, d) and the output transposed back, once that reading is proven (a
student's trial: it was driven as (B, n, d), failed five checks and was named batch-seq-swap).

Style: q_proj / k_proj / v_proj / out_proj, a `batch_first=False` constructor flag it asserts, an additive float
mask buffer of -inf above the diagonal.
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
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores + self.causal[:T, :T]
        probs = torch.softmax(scores, dim=-1)
        ctx = (probs @ v).permute(2, 0, 1, 3).reshape(T, B, E)
        return self.out_proj(ctx)


TARGET = "SeqFirstSelfAttention"
EXPECT = ()
