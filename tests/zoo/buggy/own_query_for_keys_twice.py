"""Buggy (student style, query-for-keys): the keys are made by a second call of the query projection,
`K = self.to_heads(self.W_Q(x))`, so W_K is never used (found by a student's trial: the report named the mistake
without a line, and trace said no known mistake shows).

Style: W_Q / W_K / W_V / W_O, heads split with torch.stack(t.split(dh, -1), dim=1) and merged with unbind and cat.
"""
import torch
import torch.nn as nn


class StackedHeads(nn.Module):
    def __init__(self, d_model, n_head, max_len):
        super().__init__()
        if d_model % n_head:
            raise ValueError("d_model must be divisible by n_head")
        self.d_head = d_model // n_head
        self.W_Q = nn.Linear(d_model, d_model, bias=False)
        self.W_K = nn.Linear(d_model, d_model, bias=False)
        self.W_V = nn.Linear(d_model, d_model, bias=False)
        self.W_O = nn.Linear(d_model, d_model)
        self.register_buffer("future", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))

    def to_heads(self, t):
        return torch.stack(t.split(self.d_head, dim=-1), dim=1)

    def forward(self, x):
        n = x.shape[1]
        Q = self.to_heads(self.W_Q(x))
        K = self.to_heads(self.W_Q(x))
        V = self.to_heads(self.W_V(x))
        scores = (Q @ K.transpose(-2, -1) / self.d_head ** 0.5).masked_fill(self.future[:n, :n], float("-inf"))
        return self.W_O(torch.cat((scores.softmax(-1) @ V).unbind(dim=1), dim=-1))


TARGET = "StackedHeads"
EXPECT = ("reference-match", "gradient-match", "parameters-used")
DIAGNOSIS = "query-for-keys"
LINE = 29
