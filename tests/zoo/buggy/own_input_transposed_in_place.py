"""Buggy (student style, input-modified-in-place): the layer works sequence-first, (T, B, C) as nn.MultiheadAttention
does, and turns its input with `x.transpose_(0, 1)`: the output is right, but the caller's tensor is transposed in
place, so after the call the caller's x is (T, B, C) (and a leaf that requires grad makes it raise).

Style: sequence-first `q_proj` / `k_proj` / `v_proj` / `out_proj`, heads split with view(T, B, H, hd) and permuted
to (B, H, T, hd), scores `attn`, a boolean `causal` buffer.
"""
import torch
import torch.nn as nn


class SeqFirstSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, max_len):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.num_heads, self.hd = num_heads, embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.register_buffer("causal", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, E = x.shape
        x = x.transpose_(0, 1)  # (T, B, E), sequence first
        q = self.q_proj(x).view(T, B, self.num_heads, self.hd).permute(1, 2, 0, 3)
        k = self.k_proj(x).view(T, B, self.num_heads, self.hd).permute(1, 2, 0, 3)
        v = self.v_proj(x).view(T, B, self.num_heads, self.hd).permute(1, 2, 0, 3)
        attn = q @ k.transpose(-2, -1) / self.hd ** 0.5
        attn = attn.masked_fill(self.causal[:T, :T], float("-inf")).softmax(dim=-1)
        out = (attn @ v).transpose(1, 2).reshape(B, T, E)
        return self.out_proj(out)


TARGET = "SeqFirstSelfAttention"
EXPECT = ("input-untouched",)
DIAGNOSIS = "input-modified-in-place"
LINE = 25
