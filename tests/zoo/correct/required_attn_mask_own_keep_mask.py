"""Correct: forward requires a mask, `forward(x, attn_mask)`, added to the scores, and the layer also masks by itself
with a keep-mask buffer (tril, diagonal 0).  The twin of buggy/own_mask_lets_one_future_required_attn_mask.py (a
student's trial): called with a mask hiding nothing, its own mask is causal, so causal-leakage passes.

Style: a fused `qkv` reshaped (B, T, 3, H, dh) and permuted, `att`, `keep`, `proj`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, block_size, dropout=0.0):
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must divide evenly into heads"
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim, bias=False)
        self.proj = nn.Linear(embed_dim, embed_dim)
        self.dropout = nn.Dropout(dropout)
        # keep-mask: 1 where a query may look at a key
        self.register_buffer("keep", torch.tril(torch.ones(block_size, block_size), diagonal=0))

    def forward(self, x, attn_mask):
        B, T, E = x.shape
        qkv = self.qkv(x).reshape(B, T, 3, self.num_heads, self.head_dim)
        qkv = qkv.permute(2, 0, 3, 1, 4)  # (3, B, H, T, dh)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5
        att = att.masked_fill(self.keep[:T, :T] == 0, float("-inf"))
        if attn_mask is not None:
            att = att + attn_mask
        att = self.dropout(F.softmax(att, dim=-1))
        out = (att @ v).transpose(1, 2).reshape(B, T, E)
        return self.proj(out)


TARGET = "MultiHeadSelfAttention"
EXPECT = ()
