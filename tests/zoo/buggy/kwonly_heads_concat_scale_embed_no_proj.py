"""Buggy: a learner's multi-head layer after the "build GPT" lecture - keyword-only constructor, one module per head,
the heads concatenated with no output projection, each head scaled by the INPUT width.

Stands for a real-code pattern (a learner's GPT project, first version of its multi-head layer, removed from
tests/realzoo/ with the provenance clean-up): MultiHeadAttention(*, num_heads, n_embed, head_size, block_size) holding
num_heads single-head modules (key, query, value Linear without bias, a registered tril buffer), each computing
q k^T * C ** -0.5 with C the embedding width read from the input, and forward returning torch.cat of the heads as
it is.  A later commit of the same project added the projection; the scale stayed.  Written here from that
description, in its own names.

Mistakes: scores scaled by 1/sqrt(d_model), not 1/sqrt(head_size); no output projection.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class OneHead(nn.Module):
    def __init__(self, *, n_embed, head_size, block_size):
        super().__init__()
        self.k = nn.Linear(n_embed, head_size, bias=False)
        self.q = nn.Linear(n_embed, head_size, bias=False)
        self.v = nn.Linear(n_embed, head_size, bias=False)
        self.register_buffer("lower_tri", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        _, T, C = x.shape
        affinity = self.q(x) @ self.k(x).transpose(-2, -1) * C ** -0.5
        affinity = affinity.masked_fill(self.lower_tri[:T, :T] == 0, float("-inf"))
        return F.softmax(affinity, dim=-1) @ self.v(x)


class ParallelHeads(nn.Module):
    def __init__(self, *, num_heads, n_embed, head_size, block_size):
        super().__init__()
        self.heads = nn.ModuleList(
            [OneHead(n_embed=n_embed, head_size=head_size, block_size=block_size) for _ in range(num_heads)])

    def forward(self, x):
        return torch.cat([h(x) for h in self.heads], dim=-1)


TARGET = "ParallelHeads"
EXPECT = ("reference-match", "param-count")
DIAGNOSIS = ("scale-by-sqrt-d", "no-output-projection")
