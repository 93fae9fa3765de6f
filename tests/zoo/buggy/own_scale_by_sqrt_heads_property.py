"""Buggy (student style, scale-by-sqrt-heads): the scores divided by math.sqrt(self.n_heads), the number of heads,
where the head width belongs.  Found by a student's trial: "no known mistake matches", trace's wrong-scale and
`explain wrong-scale` saying no catalogued mistake is this one; now a catalogued mistake of its own.

Style: `head_dim` a @property, a `split` method, `Wq` / `Wk` / `Wv` / `Wo`, a boolean keep-mask `tri`.
"""
import math

import torch
import torch.nn as nn


class PropertyMHA(nn.Module):
    def __init__(self, hidden, n_heads, max_len=128, drop=0.0):
        super().__init__()
        assert hidden % n_heads == 0, "hidden must divide into heads"
        self.hidden = hidden
        self.n_heads = n_heads
        self.Wq = nn.Linear(hidden, hidden, bias=False)
        self.Wk = nn.Linear(hidden, hidden, bias=False)
        self.Wv = nn.Linear(hidden, hidden, bias=False)
        self.Wo = nn.Linear(hidden, hidden)
        self.drop = nn.Dropout(drop)
        self.register_buffer("tri", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    @property
    def head_dim(self):
        return self.hidden // self.n_heads

    def split(self, t):
        b, n, _ = t.shape
        return t.view(b, n, self.n_heads, self.head_dim).transpose(1, 2)

    def forward(self, x):
        b, n, _ = x.shape
        q, k, v = self.split(self.Wq(x)), self.split(self.Wk(x)), self.split(self.Wv(x))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.n_heads)
        scores = scores.masked_fill(~self.tri[:n, :n], float("-inf"))
        weights = self.drop(scores.softmax(-1))
        merged = (weights @ v).transpose(1, 2).contiguous().view(b, n, self.hidden)
        return self.Wo(merged)


TARGET = "PropertyMHA"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-by-sqrt-heads"
LINE = 37  # the division by math.sqrt(self.n_heads)
