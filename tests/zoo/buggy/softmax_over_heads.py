"""Buggy: the softmax normalises over dim=1, the heads axis of the (B, H, n, n) scores, instead of the keys.

Style: d2l-like names (num_hiddens, W_q...) with an einsum for the scores and `F.softmax(scores, 1)`.  Every head's
weights at a (query, key) pair sum to 1 across the heads; a future position is -inf in every head, so its softmax is
0/0 = NaN.  From a student trial: it was once told as the dim=-2 mistake ("normalised with the scores of later
queries"), which is not what this code does; the right report names the softmax-axis mistake with the heads axis.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class HeadAxisSoftmax(nn.Module):
    def __init__(self, num_hiddens, num_heads, max_len, dropout=0.0):
        super().__init__()
        assert num_hiddens % num_heads == 0
        self.num_heads = num_heads
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=False)
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=False)
        self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=False)
        self.W_o = nn.Linear(num_hiddens, num_hiddens)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("future", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))

    def heads(self, t):
        b, n, _ = t.shape
        return t.reshape(b, n, self.num_heads, -1).permute(0, 2, 1, 3)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.heads(self.W_q(x)), self.heads(self.W_k(x)), self.heads(self.W_v(x))
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / (d // self.num_heads) ** 0.5
        scores = scores.masked_fill(self.future[:n, :n], float("-inf"))
        weights = self.dropout(F.softmax(scores, 1))
        out = torch.einsum("bhqk,bhkd->bhqd", weights, v)
        return self.W_o(out.permute(0, 2, 1, 3).reshape(b, n, d))


TARGET = "HeadAxisSoftmax"
EXPECT = ("reference-match",)
DIAGNOSIS = "softmax-wrong-axis"  # the mutant this mistake should be diagnosed as, told with the heads axis
