"""Buggy: causal MHA with a KV cache handed back and forth (as correct/kv_cache_sdpa_past.py), whose cached calls
drop the mask, as bark's and many nanoGPT forks' do (`is_causal = past_key_value is None`: "the last query can attend
on all previous keys"): right for one new token per call, which sees every cached key anyway, but two new tokens fed
in one call after the prompt (chunked prefill, speculative decoding) see each other.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "CachedSelfAttention"
EXPECT = ("kv-cache",)
DIAGNOSIS = "kvcache-chunk-unmasked"


class CachedSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, max_positions=1024, attn_pdrop=0.0):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.num_heads, self.head_dim = num_heads, embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.attn_pdrop = attn_pdrop

    def forward(self, x, past_key_value=None, use_cache=False):
        B, n, C = x.shape
        heads = lambda t: t.view(B, n, self.num_heads, self.head_dim).transpose(1, 2)
        q, k, v = heads(self.q_proj(x)), heads(self.k_proj(x)), heads(self.v_proj(x))
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=2)
            v = torch.cat([past_key_value[1], v], dim=2)
        present = (k, v) if use_cache else None
        p = self.attn_pdrop if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=past_key_value is None)
        y = y.transpose(1, 2).contiguous().view(B, n, C)
        return self.out_proj(y), present
