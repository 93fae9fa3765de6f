"""Buggy (student style, single-keys-dot-t): one causal head whose scores are `queries @ keys.T`, as on a 2-D
matrix; on the batched (B, T, d_out) keys .T reverses all three axes, so the product raises a shape error.

Style: one head, `query` / `key` / `value` Linears without bias, `wei`, a `tril` buffer compared with 0.
"""
import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self, d_in, d_out, context_length):
        super().__init__()
        self.query = nn.Linear(d_in, d_out, bias=False)
        self.key = nn.Linear(d_in, d_out, bias=False)
        self.value = nn.Linear(d_in, d_out, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        T = x.size(1)
        queries, keys, values = self.query(x), self.key(x), self.value(x)
        wei = queries @ keys.T / keys.size(-1) ** 0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = torch.softmax(wei, dim=-1)
        return wei @ values


TARGET = "Head"
EXPECT = ("output-shape",)
DIAGNOSIS = "single-keys-dot-t"
LINE = 21
