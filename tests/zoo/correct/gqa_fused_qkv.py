"""Correct grouped-query attention with one fused projection, in MosaicML MPT's style: `Wqkv = Linear(d_model,
d_model + 2 * kv_n_heads * head_dim)` split into [Q; K; V] along the features, `kv_n_heads` key/value heads expanded
with repeat_interleave after the transpose, SDPA with is_causal=True, `out_proj` with a bias."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_heads, kv_n_heads, max_seq_len=2048):
        super().__init__()
        if d_model % n_heads or n_heads % kv_n_heads:
            raise ValueError("d_model must be divisible by n_heads, and n_heads by kv_n_heads")
        self.n_heads, self.kv_n_heads = n_heads, kv_n_heads
        self.head_dim = d_model // n_heads
        self.d_model = d_model
        self.Wqkv = nn.Linear(d_model, d_model + 2 * kv_n_heads * self.head_dim)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        b, t, _ = x.shape
        kv_width = self.kv_n_heads * self.head_dim
        q, k, v = self.Wqkv(x).split([self.d_model, kv_width, kv_width], dim=2)
        q = q.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.kv_n_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.kv_n_heads, self.head_dim).transpose(1, 2)
        k = k.repeat_interleave(self.n_heads // self.kv_n_heads, dim=1)
        v = v.repeat_interleave(self.n_heads // self.kv_n_heads, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out_proj(y.transpose(1, 2).reshape(b, t, self.d_model))


TARGET = "GroupedQueryAttention"
EXPECT = ()
