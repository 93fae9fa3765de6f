"""Buggy (no-output-projection, made and never applied): nanoGPT's CausalSelfAttention whose forward returns the
merged heads through resid_dropout without c_proj: `self.c_proj` is made in __init__ and never applied.

Style: nanoGPT (fused c_attn split in three, c_proj, a (1, 1, T, T) tril buffer named `bias`, attn/resid dropout).
param-count passes (c_proj exists) and parameters-used finds c_proj's parameters without a gradient; the report
told the student to "add an output projection nn.Linear(d_out, d_out) in __init__", which they have: the fix is
their return line with self.c_proj applied (issue 28).
"""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.0, bias=True):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head = n_head
        self.n_embd = n_embd
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(y)  # BUG: self.resid_dropout(self.c_proj(y))


TARGET = "CausalSelfAttention"
EXPECT = ("reference-match", "gradient-match", "parameters-used")
DIAGNOSIS = "no-output-projection"
LINE = 40
FIX = "return self.resid_dropout(self.c_proj(y))"  # the student's line, c_proj applied
