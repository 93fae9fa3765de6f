"""Correct: the previous lesson's single-head `CausalAttention` as the book writes it (chapter 3, section 3.5.3),
retyped: W_query/W_key/W_value nn.Linear(d_in, d_out, bias=qkv_bias), a float triu(diagonal=1) buffer sliced to
num_tokens and turned into bool, masked_fill_ in place with -torch.inf, softmax(attn_scores / keys.shape[-1]**0.5),
dropout on the weights, no output projection.  Constructor (d_in, d_out, context_length, dropout, qkv_bias=False).
"""
import torch
import torch.nn as nn

TARGET = "CausalAttention"
EXPECT = ()


class CausalAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key   = nn.Linear(d_in, d_out, bias=qkv_bias)
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
