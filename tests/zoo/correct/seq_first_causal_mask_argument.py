"""Correct: a SEQUENCE-FIRST layer, (seq_len, batch, embed_dim) in and out, whose causal mask is a forward
ARGUMENT: `forward(src, causal_mask)` with causal_mask a (T, T) bool tensor, True = allowed (the caller builds
torch.ones(T, T).tril().bool()), no mask of its own. Called the usual way, (B, n, d), the (n, n) mask cannot fit
its scores (it reads the batch as the tokens) and forward raises with every mask; only x given sequence first runs
with it. mha-check must try the masked calls sequence first too (torchtext's container, ESM's layer).

Style: one fused `qkv` Linear(E, 3E) split [Q; K; V], einsum over a (T, B, H, hd) layout, scores masked with
masked_fill(~causal_mask, -inf), `proj` with bias; divisibility is a ValueError.
"""
import torch
import torch.nn as nn


class SeqFirstMaskedAttention(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be a multiple of num_heads")
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, src, causal_mask):
        T, B, E = src.shape
        q, k, v = self.qkv(src).view(T, B, 3, self.num_heads, self.head_dim).unbind(dim=2)  # each (T, B, H, hd)
        scores = torch.einsum("tbhd,sbhd->bhts", q, k) * self.head_dim ** -0.5
        scores = scores.masked_fill(~causal_mask, float("-inf"))
        weights = scores.softmax(dim=-1)
        out = torch.einsum("bhts,sbhd->tbhd", weights, v).reshape(T, B, E)
        return self.proj(out)


TARGET = "SeqFirstMaskedAttention"
EXPECT = ()
