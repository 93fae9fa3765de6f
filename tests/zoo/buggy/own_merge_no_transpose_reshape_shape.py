"""Buggy (student style, merge-no-transpose): heads split by `torch.stack(t.chunk(H, dim=-1), dim=1)` and merged
back with `mixed.reshape(inputs.shape)`, without moving the heads behind the tokens first: each output row mixes
several positions of one head.  The line-fix was given in words, because the merge's shape was passed whole
(`inputs.shape`) and only a view of three sizes was rewritten (a trial, 2026-12-06).

Style: spelled-out names (input_dimension, number_of_heads, maximum_length, queries / keys / values / combine), a
boolean `future` buffer, `scores` and `mixed`.
"""
import torch
import torch.nn as nn


class ChunkHeads(nn.Module):
    def __init__(self, input_dimension, number_of_heads, maximum_length):
        super().__init__()
        assert input_dimension % number_of_heads == 0
        self.number_of_heads = number_of_heads
        self.queries = nn.Linear(input_dimension, input_dimension)
        self.keys = nn.Linear(input_dimension, input_dimension)
        self.values = nn.Linear(input_dimension, input_dimension)
        self.combine = nn.Linear(input_dimension, input_dimension)
        self.register_buffer("future", torch.triu(torch.ones(maximum_length, maximum_length, dtype=torch.bool), 1))

    def forward(self, inputs):
        length = inputs.shape[1]
        heads = lambda t: torch.stack(t.chunk(self.number_of_heads, dim=-1), dim=1)
        q, k, v = heads(self.queries(inputs)), heads(self.keys(inputs)), heads(self.values(inputs))
        scores = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
        scores = scores.masked_fill(self.future[:length, :length], float("-inf"))
        mixed = scores.softmax(dim=-1) @ v
        return self.combine(mixed.reshape(inputs.shape))


TARGET = "ChunkHeads"
EXPECT = ("reference-match", "gradient-match", "causal-leakage")
DIAGNOSIS = "merge-no-transpose"
LINE = 31
