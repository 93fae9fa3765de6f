"""Buggy (a student's trial, trials/21 f06): the output projection maps back to the input width,
`nn.Linear(d_out, d_in)`, while the queries, keys, values and heads all use d_out: with d_in != d_out the output is
d_in wide.  Not d-out-ignored (every projection d_in wide): the trial was told its constructor ignored d_out.  The
mask an int8 buffer, cast to bool where it is used."""
import torch
import torch.nn as nn


class IntMaskMHA(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_in)
        self.register_buffer("future", torch.triu(torch.ones(context_length, context_length, dtype=torch.int8), 1))

    def forward(self, x):
        b, n, _ = x.shape
        q = self.W_query(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.W_key(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.W_value(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        scores = q @ k.transpose(2, 3) / self.head_dim ** 0.5
        scores = torch.masked_fill(scores, self.future[:n, :n].bool(), float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        ctx = (weights @ v).transpose(1, 2).contiguous().view(b, n, self.d_out)
        return self.out_proj(ctx)


TARGET = "IntMaskMHA"
EXPECT = ("output-shape", "param-count")
DIAGNOSIS = None  # no catalogued mistake is this one: "no known mistake matches", never d-out-ignored
