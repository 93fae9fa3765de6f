"""Correct (trial8, 2026-12-07): the book's KV-cache layer (ch04 03_kv-cache) with the report's fix for a mask not
offset applied as written, on the one line that cuts the mask: its rows start at ptr_current_pos in every call,
with the cache or without it.  From an empty cache that is row 0, so the plain forward is the lesson's; the pointer
moves only while decoding, and reset_cache() puts it back.  mha-check ran its checks of the plain forward on the
module kv-cache had decoded with (pointer at 5, never reset): mask-buffer, parameters-used, reference-match,
view-order and mask-fill failed with "The size of tensor a (5) must match the size of tensor b (2)", and no known
mistake matched; kv-cache, the one check of the cache, passed.  kv-cache now decodes on a module of its own.

Style: LLMs-from-scratch ch04 KV cache, mask cut apart from the pointer, masked_fill_ in place.
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
        mask_bool = self.mask.bool()[self.ptr_current_pos:self.ptr_current_pos + num_tokens, :num_tokens_k]
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
EXPECT = ()
