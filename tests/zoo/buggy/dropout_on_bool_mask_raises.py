"""Buggy (dropout on a boolean mask): `self.dropout(self.mask[:n, :n])`, a bool triu buffer passed through the same
nn.Dropout as the attention weights, raises in train() mode with dropout > 0 ("result type Float can't be cast to
the desired output type Bool"): a layer that cannot train.  In eval() mode, and in train() mode with dropout 0, F.dropout
hands the mask back unchanged, so it passed every check: the train-mode probe with dropout 0.5 kept no verdict for a
forward that raised there.

Style: the lesson's MultiHeadAttention with a boolean mask buffer, dropout applied twice: on the mask, and rightly
on the weights.  No catalogued mistake is a forward that raises: causal-leakage fails with the error.
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
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.dropout(self.mask[:num_tokens, :num_tokens])  # raises in training with dropout > 0
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


TARGET = "MultiHeadAttention"
EXPECT = ("causal-leakage",)
DIAGNOSIS = None
