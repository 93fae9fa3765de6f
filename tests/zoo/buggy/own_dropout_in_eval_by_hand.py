"""Buggy (student style, dropout-in-eval): dropout written by hand, a keep-mask drawn with torch.rand_like and the
weights rescaled by 1/(1 - p), at every call, with no `if self.training`: after model.eval() the layer is still
random (a student's trial: the report named the mistake without a line, titled with F.dropout the code never calls,
and trace marked nothing).

Style: GPT-2's c_attn / c_proj and `bias` tril buffer of shape (1, 1, L, L), q, k, v by .chunk(3, dim=-1).
"""
import math

import torch
import torch.nn as nn


class HandDropoutAttention(nn.Module):
    def __init__(self, d, heads, block, p_drop=0.1):
        super().__init__()
        assert d % heads == 0
        self.heads = heads
        self.p_drop = p_drop
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.register_buffer("bias", torch.tril(torch.ones(block, block)).view(1, 1, block, block))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).chunk(3, dim=-1)
        hs = C // self.heads
        q = q.view(B, T, self.heads, hs).transpose(1, 2)
        k = k.view(B, T, self.heads, hs).transpose(1, 2)
        v = v.view(B, T, self.heads, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = att.softmax(dim=-1)
        keep = (torch.rand_like(att) > self.p_drop).to(att.dtype)
        att = att * keep / (1.0 - self.p_drop)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


TARGET = "HandDropoutAttention"
EXPECT = ("eval-determinism",)
DIAGNOSIS = "dropout-in-eval"
LINE = 34
