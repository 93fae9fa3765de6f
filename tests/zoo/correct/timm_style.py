"""Correct: timm-style `Attention(dim, num_heads, qkv_bias, attn_drop)` made causal, with an optional extra mask.

Style: the vision-transformer code in timm. One fused `qkv = nn.Linear(dim, 3*dim, bias=qkv_bias)` reshaped to
(B, N, 3, H, Dh) and permuted to (3, B, H, N, Dh), q/k/v taken with unbind(0) (rows of qkv.weight are q; k; v, each
head-major), q pre-scaled by head_dim**-0.5, `proj` with bias. There is no context-length argument at all: the
causal mask is built in forward with torch.tril on x.device and applied with torch.where. forward has an extra
optional `attn_mask` (additive float or bool keep-mask) that the tool should leave at its default None.
"""
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, num_heads=8, qkv_bias=False, attn_drop=0.0):
        super().__init__()
        assert dim % num_heads == 0, "dim should be divisible by num_heads"
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5

        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, attn_mask=None):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)

        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        keep = torch.tril(torch.ones(N, N, dtype=torch.bool, device=x.device))
        attn = torch.where(keep, attn, float("-inf"))
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                attn = attn.masked_fill(~attn_mask, float("-inf"))
            else:
                attn = attn + attn_mask
        attn = attn.softmax(dim=-1)
        attn = self.attn_drop(attn)
        x = attn @ v

        x = x.transpose(1, 2).reshape(B, N, C)
        x = self.proj(x)
        return x


TARGET = "Attention"
EXPECT = ()
