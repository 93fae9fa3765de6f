"""Buggy (student style, mask-lets-one-future): forward requires a mask, `forward(x, attn_mask)`, added to the scores,
and the layer also masks by itself with a keep-mask buffer built by tril(..., diagonal=1), one diagonal too many.
Found by a student's trial: mha-check passes a causal mask (the convention the proof chose), which hid what the own
mask lets through, so every check passed.  causal-leakage now also calls forward with the same convention's mask
hiding nothing: the layer still hides some later positions by itself and lets the next one through.

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
        self.register_buffer("keep", torch.tril(torch.ones(block_size, block_size), diagonal=1))

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
EXPECT = ("causal-leakage",)
DIAGNOSIS = "mask-lets-one-future"
LINE = 24  # the tril of the keep-mask buffer, not the masked_fill that applies it
