"""Buggy: the values alone reshaped to (B, n_head, T, hs); queries and keys split right, fused SDPA.

Style: nanoGPT-like fused c_attn + scaled_dot_product_attention with a config object (n_embd, n_head, block_size,
dropout, bias). The queries and keys are split with view(B, T, n_head, hs).transpose(1, 2); for the values the
author "saved" the transpose with reshape(B, n_head, T, hs) (view refused: the slice of c_attn's output is not
contiguous). Every shape agrees and the attention weights are even right, but each value "position" of a head is
a slice cut across several tokens: token 0 receives features of token 1.
"""
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
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.reshape(B, self.n_head, T, hs)

        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
        )
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


TARGET = "CausalSelfAttention"
EXPECT = ("view-order", "reference-match", "causal-leakage")
DIAGNOSIS = "split-view-order-values"  # the mutant this mistake should be diagnosed as
