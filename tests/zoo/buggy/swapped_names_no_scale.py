"""Buggy (two mistakes at once, no-scaling and swapped-q-k): the queries come from W_key and the keys from W_query,
and the scores are never divided by sqrt(dh).

Style: the lesson's names (W_query, W_key, W_value, out_proj), a student's mix-up of which projection is which.
The names decide the reading of the parameters (the only one), so the swap is the student's own, as a swap alone is
named under the same reading.  Before, the pair was refused as the mirror of a correct layer and nothing was named
though trace marked the missing scale; the same layer with names that decide nothing (swapped_anon_no_scale.py) is
read the other way round by the numbers, and only the missing scale is named.
"""
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_query(x)
        queries = self.W_key(x)
        values = self.W_value(x)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


TARGET = "MultiHeadAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = ("swapped-q-k", "no-scaling")  # two mistakes at once, the reading fixed by the names; the swap
# first since trace marks it (its projections' lines come before the scores')
