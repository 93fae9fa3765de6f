"""One fused 4-D parameter with the model width before the heads: W_in of shape (3, d, H, dh) used as
einsum('btd,sdhe->sbhte', x, W_in), and the output projection held as W_out (d, H, dh), used as
einsum('bhte,dhe->btd'), with an output bias; no reshape anywhere (a student's trial, issue 28)."""
import math

import torch
import torch.nn as nn


class WidthFirstFused(nn.Module):
    def __init__(self, d_model, num_heads, max_len, dropout=0.0):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be a multiple of num_heads")
        head = d_model // num_heads
        self.W_in = nn.Parameter(torch.empty(3, d_model, num_heads, head))
        self.W_out = nn.Parameter(torch.empty(d_model, num_heads, head))
        self.b_out = nn.Parameter(torch.zeros(d_model))
        nn.init.xavier_uniform_(self.W_in.view(3 * d_model, -1))
        nn.init.xavier_uniform_(self.W_out.view(d_model, -1))
        self.drop = nn.Dropout(dropout)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x):
        T = x.size(1)
        q, k, v = torch.einsum("btd,sdhe->sbhte", x, self.W_in)
        att = torch.einsum("bhie,bhje->bhij", q, k) / math.sqrt(q.size(-1))
        att = att.masked_fill(~self.causal[:T, :T], float("-inf")).softmax(-1)
        ctx = torch.einsum("bhij,bhje->bhie", self.drop(att), v)
        return torch.einsum("bhte,dhe->btd", ctx, self.W_out) + self.b_out


TARGET = "WidthFirstFused"
EXPECT = ()
