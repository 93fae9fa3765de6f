"""Buggy (no-scaling; and a swap of the queries and keys that proves nothing): swapped_names_no_scale.py with
parameter names that say no role (lin_a, lin_b, lin_c, lin_d).

Read in the order the forward uses them, the layer is the lesson's without the scale: a swap of two same-shaped
projections is the mirror image of a correct layer under another reading, so only the missing scale is named.
"""
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.lin_a = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.lin_b = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.lin_c = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.lin_d = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.lin_a(x)
        queries = self.lin_b(x)
        values = self.lin_c(x)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
        return self.lin_d(context_vec)


TARGET = "MultiHeadAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "no-scaling"  # the swap is a mirror under another reading: never named
