"""Buggy (student style, no-divisibility-check): the book's layer without its assert: nothing refuses a width the
heads do not divide, and the projections are the full d_out wide, so MultiHeadAttention(6, 8, ..., num_heads=3)
builds, and its forward raises at the first view (8 features are no 3 heads of 8 // 3 = 2), far from the cause.  For
a width the heads divide it is correct.  Found by a student trial: the report gave no line for it, and said the
heads "cover only 6 of the 8 features" of a layer that raised.

Style: the book's `W_query`, `W_key`, `W_value`, `out_proj`, the constructor's parameters over two lines.

The report names it at the `def __init__` line (where the guard belongs; "you wrote" shows the two lines joined), and
the divisibility check says the forward raised; the fix is the guard in this class's own names, told in words.
"""
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads,
                 qkv_bias=False):
        super().__init__()
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
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


TARGET = "MultiHeadAttention"
EXPECT = ("divisibility",)
DIAGNOSIS = "no-divisibility-check"
LINE = 17  # def __init__ (its two lines shown joined), where the guard belongs
WROTE = "def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):"
RAISED_AT = 32  # the view the divisibility check says raised
