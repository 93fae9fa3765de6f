"""Correct: four projections whose names say nothing of their roles (`lin1` .. `lin4`), keys computed from the
first one declared, queries from the second.

Style: SDPA with is_causal, reshape to merge.  No name breaks the tie, so every assignment of q, k, v to the three
same-shaped layers is a plausible reading; the reference reproduces the module under one of them, so the math is
correct (read only in declared order, the layer was the mirror image of the swapped-q-k mistake).
"""
import torch.nn as nn
import torch.nn.functional as F

TARGET = "Attention"
EXPECT = ()


class Attention(nn.Module):
    def __init__(self, d, heads, context_length=64):
        super().__init__()
        if d % heads:
            raise ValueError("d must be divisible by heads")
        self.h = heads
        self.lin1 = nn.Linear(d, d, bias=False)
        self.lin2 = nn.Linear(d, d, bias=False)
        self.lin3 = nn.Linear(d, d, bias=False)
        self.lin4 = nn.Linear(d, d)

    def forward(self, x):
        b, t, e = x.shape
        k = self.lin1(x).view(b, t, self.h, e // self.h).transpose(1, 2)
        q = self.lin2(x).view(b, t, self.h, e // self.h).transpose(1, 2)
        v = self.lin3(x).view(b, t, self.h, e // self.h).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.lin4(y.transpose(1, 2).reshape(b, t, e))
