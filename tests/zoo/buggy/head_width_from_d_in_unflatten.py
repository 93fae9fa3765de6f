"""Buggy (head width from d_in): `head_dim = d_in // num_heads`, so with d_in != d_out the split of the d_out-wide
projections into (H, head_dim) raises; with d_in == d_out the layer is right.

Style: keyword-only constructor arguments (`*, d_in, d_out, num_heads, context_length, dropout=0.0,
qkv_bias=False`), a keyword-only `causal=True` in forward, the heads split with `unflatten(-1, (H, dh))` in a
generator over the three projections and merged with `flatten(2)`, an additive -inf mask buffer made with
torch.full(...).triu(1). From a student trial (issue 28): unflatten's error ("Provided sizes [2, 3] don't multiply up
to the size of dim 2 (8)") was not read as view's is, and the report said "no known mistake matches".
"""
import torch
import torch.nn as nn


class MHA(nn.Module):
    def __init__(self, *, d_in: int, d_out: int, num_heads: int, context_length: int, dropout: float = 0.0,
                 qkv_bias: bool = False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.num_heads, self.head_dim = num_heads, d_in // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("future", torch.full((context_length, context_length), float("-inf")).triu(1))

    def forward(self, x: torch.Tensor, *, causal: bool = True) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = (w(x).unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)
                   for w in (self.W_query, self.W_key, self.W_value))
        scores = q @ k.transpose(-2, -1) * self.head_dim ** -0.5
        if causal:
            scores = scores + self.future[:n, :n]
        w = self.dropout(torch.softmax(scores, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).flatten(2))


TARGET = "MHA"
EXPECT = ("output-shape",)
DIAGNOSIS = "head-width-from-d-in"
