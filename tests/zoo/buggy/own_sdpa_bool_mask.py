"""Buggy (student style, sdpa-bool-mask): scaled_dot_product_attention is given the boolean "future" mask (True
above the diagonal) as attn_mask; for SDPA True means "attend", so every token attends to the future only.

Style: a fused `qkv` with unbind, a `future` buffer, an output `proj`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class FlashAttention(nn.Module):
    def __init__(self, dim, num_heads, max_len):
        super().__init__()
        assert dim % num_heads == 0
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("future", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4).unbind(0)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.future[:T, :T])
        return self.proj(out.transpose(1, 2).reshape(B, T, C))


TARGET = "FlashAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "sdpa-bool-mask"
LINE = 23
