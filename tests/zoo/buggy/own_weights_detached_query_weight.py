"""Buggy (student style, weights-under-no-grad): the queries projected with F.linear on `self.W_q.weight.detach()`,
the weight cut from autograd: the output is exact, but W_q never receives a gradient (the input's gradient is
right: x is not detached).  Named weights-under-no-grad told by the line, where parameters-used finds W_q alone
without a gradient.

Style: nanoGPT-like `tril` buffer, bias-free `W_q` / `W_k` / `W_v` applied with F.linear, `att`, an output `out`.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MHA(nn.Module):
    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.out = nn.Linear(d_model, d_model)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_heads
        q = F.linear(x, self.W_q.weight.detach())
        k = F.linear(x, self.W_k.weight)
        v = F.linear(x, self.W_v.weight)
        q = q.view(B, T, self.n_heads, hs).transpose(1, 2)
        k = k.view(B, T, self.n_heads, hs).transpose(1, 2)
        v = v.view(B, T, self.n_heads, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.out(y)


TARGET = "MHA"
EXPECT = ("gradient-match", "parameters-used")
DIAGNOSIS = "weights-under-no-grad"
LINE = 29
