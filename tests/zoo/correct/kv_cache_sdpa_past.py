"""Correct: causal MHA with a KV cache handed back and forth, in the style of Hugging Face / nanoGPT forks:
`forward(x, past_key_value=None, use_cache=False)` returns `(out, present)`, the keys and values of the past are
concatenated along the tokens (axis 2 of (B, H, tokens, dh)), and F.scaled_dot_product_attention is told how to mask:
`is_causal=True` on an empty cache, no mask for one new token (it sees every cached key), and for several new tokens
after cached ones a boolean mask whose rows are their positions (bottom-right aligned: `tril(T - n)`), since
is_causal aligns its triangle top-left.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "CachedSelfAttention"
EXPECT = ()


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
        T = k.shape[2]
        p = self.attn_pdrop if self.training else 0.0
        if past_key_value is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        elif n == 1:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=p)
        else:  # the new tokens sit at positions T - n .. T - 1: keep keys up to each one's own position
            keep = torch.ones(n, T, dtype=torch.bool, device=x.device).tril(T - n)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=p)
        y = y.transpose(1, 2).contiguous().view(B, n, C)
        return self.out_proj(y), present
