"""Buggy: the attention weights are computed inside `with torch.no_grad():`.

Style: book-like W_query / W_key / W_value / out_proj with a triu buffer. The author wrapped "the mask part" in
no_grad ("the mask is a constant, it needs no gradient") and the block grew to include the scores and the softmax.
The forward output is exactly right, but no gradient flows through the attention weights: W_query and W_key get
no gradient at all and the input gradient misses the query/key paths.
"""
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, _ = x.shape
        split = lambda t: t.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries, keys, values = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))

        with torch.no_grad():
            mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
            attn_scores = queries @ keys.transpose(2, 3)
            attn_scores = attn_scores.masked_fill(mask_bool, -torch.inf)
            attn_weights = torch.softmax(attn_scores / self.head_dim ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = (attn_weights @ values).transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


TARGET = "MultiHeadAttention"
EXPECT = ("gradient-match",)
DIAGNOSIS = "weights-under-no-grad"  # the mutant this mistake should be diagnosed as
