"""One fused 4-D parameter for the three projections, role axis first: w_qkv of shape (3, H, d, dh) used as
q, k, v = einsum('btd,shde->sbhte', x, w_qkv), and an output projection held per head as w_o (H, dh, d) with a bias
(a student's trial, issue 28: "readings decided by evidence"); the heads are never split or merged by a reshape."""
import math

import torch
import torch.nn as nn


class FusedEinsumHeads(nn.Module):
    def __init__(self, d_model, n_heads, context_length):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        dh = d_model // n_heads
        self.scale = 1.0 / math.sqrt(dh)
        self.w_qkv = nn.Parameter(torch.randn(3, n_heads, d_model, dh) / math.sqrt(d_model))
        self.w_o = nn.Parameter(torch.randn(n_heads, dh, d_model) / math.sqrt(d_model))
        self.b_o = nn.Parameter(torch.zeros(d_model))
        self.register_buffer("future", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        n = x.shape[1]
        q, k, v = torch.einsum("btd,shde->sbhte", x, self.w_qkv)
        scores = torch.einsum("bhqe,bhke->bhqk", q, k) * self.scale
        weights = scores.masked_fill(self.future[:n, :n], float("-inf")).softmax(dim=-1)
        heads = torch.einsum("bhqk,bhke->bhqe", weights, v)
        return torch.einsum("bhte,hed->btd", heads, self.w_o) + self.b_o


TARGET = "FusedEinsumHeads"
EXPECT = ()
