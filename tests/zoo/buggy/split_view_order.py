"""Buggy: heads split with reshape(B, n_head, T, hs) instead of view(B, T, n_head, hs).transpose(1, 2).

Style: nanoGPT-like fused c_attn + SDPA taking a config object (n_embd, n_head, block_size, dropout, bias).
The author "saved" the transpose by going straight to (B, nh, T, hs); `view` refused (the slices of the fused
c_attn output are not contiguous), so they switched to `reshape`, which copies and silently succeeds. The shapes
all agree, but each "token" row of a head is now a chunk of the flattened (T, C) matrix, so tokens and features
are mixed. The merge (transpose + contiguous + view) is the correct one: this is exactly the split-order mutant.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        hs = C // self.n_head
        q = q.reshape(B, self.n_head, T, hs)
        k = k.reshape(B, self.n_head, T, hs)
        v = v.reshape(B, self.n_head, T, hs)

        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
        )
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


TARGET = "CausalSelfAttention"
EXPECT = ("view-order", "reference-match")
DIAGNOSIS = "split-view-order"  # the mutant this mistake should be diagnosed as
