"""Buggy (two mistakes at once, split-view-order and merge-no-transpose, nanoGPT style): the fused c_attn output's
slices are split with reshape(B, n_head, T, hs) and the heads merged back with reshape(B, T, C), neither with its
transpose; `reshape` copies where `view` would have refused the slices, so every shape agrees.

Style: nanoGPT-like fused c_attn + SDPA taking a config object (n_embd, n_head, block_size, dropout, bias).  A fused
projection has several readings (blocks, per head), so the reading itself is proven by the pair: under exactly one
reading the two mistakes together reproduce the output, and no single mistake does under any.
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
        y = y.reshape(B, T, C)
        return self.c_proj(y)


TARGET = "CausalSelfAttention"
EXPECT = ("view-order", "causal-leakage", "reference-match")
DIAGNOSIS = ("split-view-order", "merge-no-transpose")  # two mistakes at once: both named, each at its line
LINES = (28, 35)
