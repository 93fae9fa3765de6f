"""Buggy: the softmax's weights divided by sqrt(head_dim), `F.softmax(att, dim=-1) / math.sqrt(self.head_dim)`,
where the scores should be: three named projections, heads folded into the batch for torch.bmm, the mask an
additive -inf buffer."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class BmmHeadsAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, block_size):
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.query = nn.Linear(embed_dim, embed_dim)
        self.key = nn.Linear(embed_dim, embed_dim)
        self.value = nn.Linear(embed_dim, embed_dim)
        self.proj = nn.Linear(embed_dim, embed_dim)
        future = torch.triu(torch.full((block_size, block_size), float("-inf")), diagonal=1)
        self.register_buffer("future", future)

    def _fold(self, t, B, T):
        return t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2).reshape(B * self.num_heads, T,
                                                                                   self.head_dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = (self._fold(f(x), B, T) for f in (self.query, self.key, self.value))
        att = torch.bmm(q, k.transpose(1, 2)) + self.future[:T, :T]
        att = F.softmax(att, dim=-1) / math.sqrt(self.head_dim)
        y = torch.bmm(att, v).view(B, self.num_heads, T, self.head_dim)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


TARGET = "BmmHeadsAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-after-softmax"
LINE = 32
