"""The reference single-head `CausalAttention` of the previous lesson (the one LM3-T5 builds on), with Q/K/V bias
and dropout.

One head of width d_out, no head split and no output projection: mha-check recognises this form from the
constructor, which takes no number of heads (harness.wire.form), and checks it against the numpy reference with
one head and W_o the identity.  The forward is kept line for line in the lesson's style (`W_query`, `W_key`,
`W_value`, the mask buffer sliced to the input's length and filled in place), because the mutants `single_*.py` are
copies of this class with one deliberate bug each and their diffs against it must stay readable.
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
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)  # (b, num_tokens, num_tokens)
        attn_scores.masked_fill_(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = attn_weights @ values
        return context_vec
