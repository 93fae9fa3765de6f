"""Correct: peterbloem/former's style, the key projection declared first: `tokeys`, `toqueries`, `tovalues`, then
`unifyheads`.

Style: heads folded into the batch (b·h, t, s), queries and keys each scaled by the fourth root of the head width,
`torch.bmm`, a triu mask filled with -inf.  Read by position, `tokeys` was taken for W_q, and this correct layer was
told it had swapped its queries and keys (the mirror image of a correct layer); its names say which is which.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "SelfAttention"
EXPECT = ()


class SelfAttention(nn.Module):
    def __init__(self, emb, heads=8, context_length=64):
        super().__init__()
        assert emb % heads == 0, f"Embedding dimension ({emb}) should be divisible by nr. of heads ({heads})"
        self.emb, self.heads = emb, heads
        self.tokeys = nn.Linear(emb, emb, bias=False)
        self.toqueries = nn.Linear(emb, emb, bias=False)
        self.tovalues = nn.Linear(emb, emb, bias=False)
        self.unifyheads = nn.Linear(emb, emb)

    def forward(self, x):
        b, t, e = x.size()
        h = self.heads
        s = e // h
        keys = self.tokeys(x).view(b, t, h, s).transpose(1, 2).contiguous().view(b * h, t, s)
        queries = self.toqueries(x).view(b, t, h, s).transpose(1, 2).contiguous().view(b * h, t, s)
        values = self.tovalues(x).view(b, t, h, s).transpose(1, 2).contiguous().view(b * h, t, s)
        queries = queries / (s ** (1 / 4))
        keys = keys / (s ** (1 / 4))
        dot = torch.bmm(queries, keys.transpose(1, 2))
        future = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
        dot = dot.masked_fill(future, float("-inf"))
        dot = F.softmax(dot, dim=2)
        out = torch.bmm(dot, values).view(b, h, t, s)
        out = out.transpose(1, 2).contiguous().view(b, t, s * h)
        return self.unifyheads(out)
