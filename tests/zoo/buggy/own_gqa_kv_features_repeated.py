"""Buggy (student style, gqa-expand-wrong-axis): a grouped-query layer that makes its narrow key/value projections
as wide as the queries with `repeat_interleave(n_rep, dim=-1)` before splitting them into heads: each feature is
repeated, not each head, so a query head meets half the features of a key/value head, each written twice.

Style: `n_kv_head` / `n_rep`, W_q / W_k / W_v and an output `proj`, `att`, a boolean `causal` buffer.
"""
import torch
import torch.nn as nn


class GQA(nn.Module):
    def __init__(self, n_embd, n_head, n_kv_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0 and n_head % n_kv_head == 0
        self.n_head, self.hs, self.n_rep = n_head, n_embd // n_head, n_head // n_kv_head
        self.W_q = nn.Linear(n_embd, n_embd, bias=False)
        self.W_k = nn.Linear(n_embd, n_kv_head * self.hs, bias=False)
        self.W_v = nn.Linear(n_embd, n_kv_head * self.hs, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("causal", torch.ones(block_size, block_size, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, C = x.shape
        k = self.W_k(x).repeat_interleave(self.n_rep, dim=-1)  # as wide as the queries
        v = self.W_v(x).repeat_interleave(self.n_rep, dim=-1)
        q = self.W_q(x).view(B, T, self.n_head, self.hs).transpose(1, 2)
        k = k.view(B, T, self.n_head, self.hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / self.hs ** 0.5
        att = att.masked_fill(self.causal[:T, :T], float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))


TARGET = "GQA"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "gqa-expand-wrong-axis"
LINE = 24  # the keys' line; the values' (25) is marked too
