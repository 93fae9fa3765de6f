"""Buggy (student trial 12): an additive float mask for scaled_dot_product_attention made in __init__ with -100
where -inf belongs (`bias[torch.triu(...)] = -100.0`), registered as a buffer and sliced in forward. SDPA adds a
float attn_mask to the scores, so the future keeps a weight of e^-100: finite-fill-100, found by causal-leakage. The
report had named it with no line and the trace had marked nothing (only masked_fill, where and additions in
forward were read); the mask given to SDPA is read now, and told at the line that made the buffer (the -100 is
written on the line after it, which the child does not record).

Style: `embed_dim, num_heads`, a fused in_proj reshaped to (B, T, 3, H, dh) and permuted, SDPA with attn_mask.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "FlashishAttention"
EXPECT = ("causal-leakage",)
DIAGNOSIS = "finite-fill-100"
LINE = 29  # the line that writes the -100 into the buffer made on the line before
MUST_PASS = ("reference-match", "output-shape")


class FlashishAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, max_seq_len=1024):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.num_heads = num_heads
        self.in_proj = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        bias = torch.zeros(max_seq_len, max_seq_len)
        bias[torch.triu(torch.ones(max_seq_len, max_seq_len, dtype=torch.bool), 1)] = -100.0
        self.register_buffer("attn_bias", bias)

    def forward(self, x):
        B, T, E = x.shape
        qkv = self.in_proj(x).reshape(B, T, 3, self.num_heads, E // self.num_heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=self.attn_bias[:T, :T])
        return self.out_proj(y.transpose(1, 2).reshape(B, T, E))
