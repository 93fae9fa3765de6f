"""Correct: raw parameters in the "W x" convention, W of shape (d_out, d_in), separate d_in and d_out.

Style: someone coming from the papers' column-vector notation (q = W_q x). Weights are created with randn and a
1/sqrt(fan_in) scale, projections are `(W @ x^T)^T + b`, the output projection uses F.linear. Optional Q/K/V biases
are registered as None when absent. The causal mask is built in forward on x.device (no buffer; context_length is
only used to reject over-long inputs) and filled with torch.finfo(dtype).min instead of -inf.
Split with unflatten + transpose, merge with transpose + flatten.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError("num_heads must divide d_out")
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.p = dropout

        def matrix(rows, cols):
            return nn.Parameter(torch.randn(rows, cols) / math.sqrt(cols))

        self.Wq = matrix(d_out, d_in)
        self.Wk = matrix(d_out, d_in)
        self.Wv = matrix(d_out, d_in)
        if qkv_bias:
            self.bq = nn.Parameter(torch.zeros(d_out))
            self.bk = nn.Parameter(torch.zeros(d_out))
            self.bv = nn.Parameter(torch.zeros(d_out))
        else:
            self.register_parameter("bq", None)
            self.register_parameter("bk", None)
            self.register_parameter("bv", None)
        self.Wo = matrix(d_out, d_out)
        self.bo = nn.Parameter(torch.zeros(d_out))

    @staticmethod
    def _project(W, b, x):
        # W x for every token: (d_out, d_in) @ (..., d_in, n) -> (..., d_out, n), back to (..., n, d_out)
        y = (W @ x.transpose(-1, -2)).transpose(-1, -2)
        return y if b is None else y + b

    def forward(self, x):
        B, n, _ = x.shape
        if n > self.context_length:
            raise ValueError(f"sequence of length {n} exceeds context_length={self.context_length}")

        def heads(t):  # (B, n, d_out) -> (B, H, n, dh)
            return t.unflatten(-1, (self.num_heads, self.head_dim)).transpose(1, 2)

        q = heads(self._project(self.Wq, self.bq, x))
        k = heads(self._project(self.Wk, self.bk, x))
        v = heads(self._project(self.Wv, self.bv, x))

        scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)
        probs = F.dropout(scores.softmax(-1), p=self.p, training=self.training)

        out = (probs @ v).transpose(1, 2).flatten(2)  # (B, n, d_out)
        return F.linear(out, self.Wo, self.bo)


TARGET = "Attention"
EXPECT = ()
