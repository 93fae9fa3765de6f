"""Buggy (trial8, 2026-12-07): the book's KV-cache layer (ch04 03_kv-cache: forward(x, use_cache), reset_cache(),
ptr_current_pos) with the mask's rows cut from 0, `self.mask.bool()[:num_tokens, :num_tokens_k]`, on a line of its
own; the in-place `masked_fill_` follows, and the scaling is done inside the softmax's call.  The report and the
trace named kvcache-mask-not-offset, right, but at the softmax's line (the operation that fed the softmax), which
holds no mask: the line to change is the one that cuts the mask's rows.

Style: LLMs-from-scratch ch04 KV cache, mask cut apart, masked_fill_ in place, scaled inside torch.softmax(...).
"""
import torch
import torch.nn as nn


class MultiHeadAttentionKV(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1),
                             persistent=False)
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        self.ptr_current_pos = 0

    def forward(self, x, use_cache=False):
        b, num_tokens, _ = x.shape
        keys_new = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values_new = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        if use_cache:
            if self.cache_k is None:
                self.cache_k, self.cache_v = keys_new, values_new
            else:
                self.cache_k = torch.cat([self.cache_k, keys_new], dim=2)
                self.cache_v = torch.cat([self.cache_v, values_new], dim=2)
            keys, values = self.cache_k, self.cache_v
        else:
            keys, values = keys_new, values_new
        attn_scores = queries @ keys.transpose(2, 3)
        num_tokens_k = keys.shape[2]
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens_k]
        if use_cache:
            self.ptr_current_pos += num_tokens
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim ** 0.5, dim=-1)
        context = (attn_weights @ values).transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context)

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0


TARGET = "MultiHeadAttentionKV"
EXPECT = ("kv-cache",)
DIAGNOSIS = "kvcache-mask-not-offset"
LINE = 46  # the mask's rows cut from 0, not from ptr_current_pos
