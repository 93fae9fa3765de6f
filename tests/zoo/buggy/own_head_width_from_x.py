"""Buggy (student style, head-width-from-d-in): the head width read off the input, `c // self.n_head` with
`b, t, c = x.shape`, as nanoGPT does where the input and the output are one width; this layer takes the two widths
apart (d_in, d_out), so with d_in != d_out the split of the d_out-wide projections raises.

Style: the book's constructor words (d_in, d_out) and nanoGPT's forward words (`b, t, c`, `att`, `y`), a
nested `heads(z)` that splits each of three bias-free Linears `W_q`, `W_k`, `W_v`, a boolean `keep` buffer (True where a token may look) applied with
masked_fill(~keep), an attention dropout `drop`, the heads merged with reshape(b, t, -1) and projected by `proj`.
With d_in == d_out the layer is right.
"""
import math

import torch
import torch.nn as nn


class SplitByInput(nn.Module):
    def __init__(self, d_in, d_out, n_head, block_size, attn_pdrop=0.0):
        super().__init__()
        assert d_out % n_head == 0, "d_out must be divisible by n_head"
        self.n_head = n_head
        self.W_q = nn.Linear(d_in, d_out, bias=False)
        self.W_k = nn.Linear(d_in, d_out, bias=False)
        self.W_v = nn.Linear(d_in, d_out, bias=False)
        self.proj = nn.Linear(d_out, d_out)
        self.drop = nn.Dropout(attn_pdrop)
        self.register_buffer("keep", torch.tril(torch.ones(block_size, block_size, dtype=torch.bool)))

    def forward(self, x):
        b, t, c = x.shape

        def heads(z):
            return z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)

        q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        att = self.drop(att.masked_fill(~self.keep[:t, :t], float("-inf")).softmax(dim=-1))
        y = (att @ v).transpose(1, 2).reshape(b, t, -1)
        return self.proj(y)


TARGET = "SplitByInput"
EXPECT = ("output-shape",)
DIAGNOSIS = "head-width-from-d-in"
LINE = 32
