"""Correct: a float attn_mask for scaled_dot_product_attention, 0 where a token may look and -inf above the
diagonal (torch.ones(...).triu(1)), instead of is_causal=True (the trace reads the float mask: it must mark nothing).

Style: a fused `qkv_proj` reshaped to (B, L, 3, H, dh) and permuted to (3, B, H, L, dh), the mask built in forward on
x.device with x.dtype.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SdpaFloatMask(nn.Module):
    def __init__(self, d_model, num_heads, max_len=512):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads = num_heads
        self.qkv_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.max_len = max_len

    def forward(self, x):
        B, L, D = x.shape
        qkv = self.qkv_proj(x).reshape(B, L, 3, self.num_heads, D // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attn_mask = torch.zeros(L, L, device=x.device, dtype=x.dtype)
        attn_mask = attn_mask.masked_fill(torch.ones(L, L, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
        y = y.transpose(1, 2).reshape(B, L, D)
        return self.out_proj(y)


TARGET = "SdpaFloatMask"
