"""Buggy (student style, layer-in-forward): the output projection is created inside forward, `out_proj =
nn.Linear(self.d_out, self.d_out)`, so every call draws new random weights: the output changes from call to call
even in eval mode with the same input, the layer has no registered W_o (model.parameters() lacks it, the optimizer
never trains it), and .to(device) cannot move it.

Style: separate W_query / W_key / W_value Linear layers, a `mask` buffer, `attn_scores` / `attn_weights` /
`context_vec` (the lesson's names); the attention itself is right.
"""
import torch
import torch.nn as nn


class LazyOutAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, n, _ = x.shape
        queries = self.W_query(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        keys = self.W_key(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores = attn_scores.masked_fill(self.mask.bool()[:n, :n], -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim ** 0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2).contiguous().view(b, n, self.d_out)
        out_proj = nn.Linear(self.d_out, self.d_out)  # BUG: new random weights at every call
        return out_proj(context_vec)


TARGET = "LazyOutAttention"
EXPECT = ("eval-determinism", "param-count")
DIAGNOSIS = "layer-in-forward"
LINE = 34
