"""Buggy (a lesson rule, not the math): the future is hidden by adding -1e9 to its scores, not by a -inf fill.

Style: the annotated transformer's convention written additively, with `wei`, a `tril` buffer and heads in a
ModuleList-free fused projection. At every magnitude a model reaches, e^(-1e9) is exactly 0 in float64, so outputs
and gradients are the lesson's; future tokens whose scores pass 1e9 get through, and -1e9 overflows float16.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "AdditiveMaskAttention"
EXPECT = ["mask-fill"]
DIAGNOSIS = "additive-mask-1e9"


class AdditiveMaskAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.0):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))
        wei = q @ k.transpose(-2, -1) / math.sqrt(hs)
        wei = wei + (1.0 - self.tril[:T, :T]) * -1e9
        wei = self.drop(F.softmax(wei, dim=-1))
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(out)
