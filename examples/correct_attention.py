"""Causal multi-head attention, written the way chapter 3 of "Build a Large Language Model (From Scratch)" does.

Check it with:

    mha-check examples/correct_attention.py:MultiHeadAttention
"""
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        # The width d_out is divided among the heads, so it must split evenly.
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"

        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads  # width of one head

        # One big projection each for queries, keys and values: all heads at once.
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        # The output projection mixes the concatenated heads (it has a bias).
        self.out_proj = nn.Linear(d_out, d_out)
        # Dropout on the attention weights (only active in training mode).
        self.dropout = nn.Dropout(dropout)
        # Causal mask: True above the diagonal = "future, not allowed". A buffer, so it follows .to(device).
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        )

    def forward(self, x):
        b, num_tokens, _ = x.shape

        # (b, num_tokens, d_out)
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)

        # Split the last dimension into heads: (b, num_tokens, num_heads, head_dim),
        # then move the heads next to the batch: (b, num_heads, num_tokens, head_dim).
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)

        # One (num_tokens, num_tokens) score matrix per head, scaled by sqrt(head_dim).
        attn_scores = queries @ keys.transpose(2, 3) / self.head_dim ** 0.5
        # Hide the future: -inf becomes exactly 0 after the softmax.
        attn_scores = attn_scores.masked_fill(self.mask[:num_tokens, :num_tokens], float("-inf"))
        # Normalise over the keys (last axis), then dropout on the weights.
        attn_weights = torch.softmax(attn_scores, dim=-1)
        attn_weights = self.dropout(attn_weights)

        # (b, num_heads, num_tokens, head_dim) -> (b, num_tokens, num_heads, head_dim);
        # contiguous() is needed before view after a transpose.
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)  # concatenate the heads
        return self.out_proj(context_vec)
