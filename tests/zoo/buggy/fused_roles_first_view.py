"""Buggy: a fused Q/K/V projection viewed roles-first, `qkv(x).view(B, 3, T, H, hd)`, where the roles are the last
axis of its output ((B, T, 3·d): each token's q, k and v side by side).

Style: one nn.Linear(d_model, 3 * d_model), `unbind(1)`, SDPA with is_causal=True, `proj`. The view runs (the sizes
agree) but reads the (B, T, 3·d) tensor in the wrong order: the "queries" are the first third of the flattened
tokens' features (token 0's q, k and v, then token 1's ...), so each position's query, key and value come from other
tokens, and the future leaks although the mask is right. On two tokens the leak looks like an inverted mask (token 0
moved by token 1 alone): mha-check said "the mask is inverted" and pointed at a mask that is_causal=True made right.
"""
import torch.nn as nn
import torch.nn.functional as F


class FusedAttn(nn.Module):
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        assert d_model % n_heads == 0
        self.nh, self.hd = n_heads, d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape
        qkv = self.qkv(x).view(B, 3, T, self.nh, self.hd)  # BUG: the roles are the last axis: view(B, T, 3, nh, hd)
        q, k, v = qkv.unbind(1)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


TARGET = "FusedAttn"
EXPECT = ("causal-leakage",)
DIAGNOSIS = None  # no catalogued mistake views a fused projection roles-first; the leak is told as a leak, not a mask
