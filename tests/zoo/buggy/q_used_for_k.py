"""Buggy: copy-paste slip, the keys are computed with the query projection (k = self.W_q(x)).

Style: d2l-flavoured code with W_q / W_k / W_v / W_o Linear layers, heads folded into the batch axis with
reshape + permute and torch.bmm, causal mask built from aranges on x.device. W_k exists (so the parameter count is
right) but is never used: scores are q q^T, and W_k gets no gradient.
"""
import math

import torch
from torch import nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, num_hiddens, num_heads, max_len, dropout=0.0, bias=False):
        super().__init__()
        assert num_hiddens % num_heads == 0
        self.num_heads = num_heads
        self.max_len = max_len
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens)
        self.dropout = nn.Dropout(dropout)

    def _fold(self, X):
        B, T, _ = X.shape
        return X.reshape(B, T, self.num_heads, -1).permute(0, 2, 1, 3).reshape(B * self.num_heads, T, -1)

    def _unfold(self, X, B):
        _, T, dh = X.shape
        return X.reshape(B, self.num_heads, T, dh).permute(0, 2, 1, 3).reshape(B, T, -1)

    def forward(self, x):
        B, T, _ = x.shape
        q = self._fold(self.W_q(x))
        k = self._fold(self.W_q(x))
        v = self._fold(self.W_v(x))
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1])
        idx = torch.arange(T, device=x.device)
        scores = scores.masked_fill(idx[None, :] > idx[:, None], float("-inf"))
        attn = self.dropout(torch.softmax(scores, dim=-1))
        return self.W_o(self._unfold(torch.bmm(attn, v), B))


TARGET = "MultiHeadSelfAttention"
EXPECT = ("reference-match",)
DIAGNOSIS = "query-for-keys"  # the mutant this mistake should be diagnosed as
