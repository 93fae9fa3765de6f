"""Buggy: functional F.dropout(att, p) without `training=self.training`, so dropout stays on in eval().

Style: compact fused-QKV code (`self.qkv`, unbind after a reshape/permute) with the dropout probability stored as
a float and applied functionally. F.dropout defaults to training=True, so model.eval() changes nothing: outputs
are random in evaluation whenever dropout > 0. With dropout=0 the layer is correct.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalMHA(nn.Module):
    def __init__(self, embed_dim, num_heads, context_length, dropout=0.1):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.attn_p = dropout
        self.qkv = nn.Linear(embed_dim, 3 * embed_dim, bias=False)
        self.out = nn.Linear(embed_dim, embed_dim)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        B, T, E = x.shape
        q, k, v = self.qkv(x).reshape(B, T, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        att = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim)
        att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        att = F.dropout(att, p=self.attn_p)
        y = (att @ v).transpose(1, 2).reshape(B, T, E)
        return self.out(y)


TARGET = "CausalMHA"
EXPECT = ("eval-determinism",)
DIAGNOSIS = "dropout-in-eval"  # the mutant this mistake should be diagnosed as
