"""Raw per-head parameters: W_q, W_k, W_v of shape (H, d, dh) and W_o of shape (H, dh, d), all used through
einsum, with an output bias; the heads are never split or merged by a reshape at all."""
import math

import torch
import torch.nn as nn


class EinsumHeads(nn.Module):
    def __init__(self, d_model, n_heads, context_length):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        dh = d_model // n_heads
        self.scale = 1.0 / math.sqrt(dh)
        self.W_q = nn.Parameter(torch.randn(n_heads, d_model, dh) / math.sqrt(d_model))
        self.W_k = nn.Parameter(torch.randn(n_heads, d_model, dh) / math.sqrt(d_model))
        self.W_v = nn.Parameter(torch.randn(n_heads, d_model, dh) / math.sqrt(d_model))
        self.W_o = nn.Parameter(torch.randn(n_heads, dh, d_model) / math.sqrt(d_model))
        self.b_o = nn.Parameter(torch.zeros(d_model))
        self.register_buffer("future", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        n = x.shape[1]
        q = torch.einsum("bnd,hde->bhne", x, self.W_q)
        k = torch.einsum("bnd,hde->bhne", x, self.W_k)
        v = torch.einsum("bnd,hde->bhne", x, self.W_v)
        scores = torch.einsum("bhqe,bhke->bhqk", q, k) * self.scale
        weights = scores.masked_fill(self.future[:n, :n], float("-inf")).softmax(dim=-1)
        heads = torch.einsum("bhqk,bhke->bhqe", weights, v)
        return torch.einsum("bhne,hed->bnd", heads, self.W_o) + self.b_o


TARGET = "EinsumHeads"
EXPECT = ()
