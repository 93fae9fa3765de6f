"""Buggy (student style, no-output-projection): the heads are merged and returned as they are, with no output
projection: the features found by different heads never mix, and the layer has d² + d parameters too few.

Style: Karpathy's `wei` and `tril` names, projections W_q / W_k / W_v, the merged heads returned by `return out`,
a line with no torch operation of its own: the report and `mha-check trace` point there, where the projection is to
be applied.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.W_q = nn.Linear(n_embd, n_embd, bias=False)
        self.W_k = nn.Linear(n_embd, n_embd, bias=False)
        self.W_v = nn.Linear(n_embd, n_embd, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q = self.W_q(x).view(B, T, self.n_head, hs).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_head, hs).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * hs ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return out  # BUG: no output projection


TARGET = "MultiHeadAttention"
EXPECT = ("param-count",)
DIAGNOSIS = "no-output-projection"
LINE = 33  # the student's line the report must point to
