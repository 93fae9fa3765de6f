"""Buggy: peterbloem/former's names (`tokeys`, `toqueries`, `tovalues`, `unifyheads`), but the queries are taken
from `tokeys` and the keys from `toqueries`.

Style: heads folded into the batch, `torch.bmm`, -inf fill.  Under the reading by position this file would be a
correct layer (its first projection used for queries); its names say otherwise, so the swap is the mistake.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "SelfAttention"
EXPECT = ["reference-match", "gradient-match"]
DIAGNOSIS = "swapped-q-k"


class SelfAttention(nn.Module):
    def __init__(self, emb, heads=8, context_length=64):
        super().__init__()
        assert emb % heads == 0
        self.emb, self.heads = emb, heads
        self.tokeys = nn.Linear(emb, emb, bias=False)
        self.toqueries = nn.Linear(emb, emb, bias=False)
        self.tovalues = nn.Linear(emb, emb, bias=False)
        self.unifyheads = nn.Linear(emb, emb)

    def forward(self, x):
        b, t, e = x.size()
        h, s = self.heads, e // self.heads
        queries = self.tokeys(x).view(b, t, h, s).transpose(1, 2).reshape(b * h, t, s)
        keys = self.toqueries(x).view(b, t, h, s).transpose(1, 2).reshape(b * h, t, s)
        values = self.tovalues(x).view(b, t, h, s).transpose(1, 2).reshape(b * h, t, s)
        dot = torch.bmm(queries, keys.transpose(1, 2)) / s ** 0.5
        future = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
        dot = F.softmax(dot.masked_fill(future, float("-inf")), dim=2)
        out = torch.bmm(dot, values).view(b, h, t, s)
        return self.unifyheads(out.transpose(1, 2).reshape(b, t, e))
