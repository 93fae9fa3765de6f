"""Buggy: every head is full width (d_in -> d_out), so the parameter count grows with the number of heads.

Style: the book's chapter-3 `MultiHeadAttentionWrapper`, a ModuleList of single-head `CausalAttention(d_in, d_out,
...)` modules concatenated to num_heads * d_out features, plus an out_proj the student added to get back to d_out.
It is a causal attention layer and it runs, but it is not the lesson's layer: 3*H*d_in*d_out + H*d_out^2 + d_out
parameters instead of 3*d_in*d_out + d_out^2 + d_out.
"""
import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer('mask', torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)

        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        context_vec = attn_weights @ values
        return context_vec


class MultiHeadAttentionWrapper(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias)
             for _ in range(num_heads)]
        )
        self.out_proj = nn.Linear(num_heads * d_out, d_out)

    def forward(self, x):
        return self.out_proj(torch.cat([head(x) for head in self.heads], dim=-1))


TARGET = "MultiHeadAttentionWrapper"
EXPECT = ("param-count", "head-invariance")
DIAGNOSIS = "full-width-heads"  # the mutant this mistake should be diagnosed as
