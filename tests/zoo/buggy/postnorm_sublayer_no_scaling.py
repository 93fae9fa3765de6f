"""Buggy: a post-LN sublayer, LayerNorm(x + attention(x)), whose scores are never scaled.

Style: an "Attention is all you need" course's encoder-decoder sublayer written with a LayerNorm class of its own
(gain and bias vectors, mean and variance by hand, eps 1e-6), separate query/key/value projections named
linear_q, linear_k, linear_v, heads folded with reshape/permute, an explicit tril mask buffer, and softmax of the raw
q @ k^T.  Issue 28: before the norm could be switched off the only failing check was param-count, blaming the
LayerNorm; with it switched off and the residual taken away, the numbers are no-scaling's, and the checks of the math
fail on them.
"""
import torch
import torch.nn as nn


class LayerNorm(nn.Module):
    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.a_2 = nn.Parameter(torch.ones(features))
        self.b_2 = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = (x.var(-1, keepdim=True, unbiased=False) + self.eps).sqrt()
        return self.a_2 * (x - mean) / std + self.b_2


class PostNormSelfAttention(nn.Module):
    def __init__(self, d_model, h, block_size):
        super().__init__()
        assert d_model % h == 0
        self.h, self.d_k = h, d_model // h
        self.linear_q = nn.Linear(d_model, d_model)
        self.linear_k = nn.Linear(d_model, d_model)
        self.linear_v = nn.Linear(d_model, d_model)
        self.linear_out = nn.Linear(d_model, d_model)
        self.ln = LayerNorm(d_model)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (lin(x).reshape(B, T, self.h, self.d_k).permute(0, 2, 1, 3)
                   for lin in (self.linear_q, self.linear_k, self.linear_v))
        scores = q @ k.transpose(-2, -1)  # BUG: never divided by sqrt(d_k)
        scores = scores.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        ctx = (scores.softmax(dim=-1) @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        return self.ln(x + self.linear_out(ctx))


TARGET = "PostNormSelfAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "no-scaling"
