"""Buggy (student style, residual-inside): the forward returns x + self.proj(y), the transformer block's residual
connection written inside the attention layer.  Found by a student's trial: "no known mistake matches" with the
lesson's whole recipe as the fix (which the layer already follows), and a trace that listed the add as a step of no
name and said no known mistake shows; now a catalogued mistake of its own, whose numbers prove the reading.

Style: nanoGPT-like, one fused c_attn split with .split(C, dim=2), a (1, 1, T, T) `bias` buffer of ones below the
diagonal, names n_embd / n_head / block_size.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class SelfAttentionBlock(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.0):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.drop(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return x + self.proj(y)


TARGET = "SelfAttentionBlock"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "residual-inside"
LINE = 36  # return x + self.proj(y)
