"""Correct (heads merged in reverse order): nanoGPT-style fused `c_attn` (rows q; k; v) and `c_proj`, with the heads
concatenated last head first before the output projection.

Style: nanoGPT's CausalSelfAttention(config) with a masked softmax; the merge is written
`torch.cat([y[:, h] for h in reversed(range(self.n_head))], dim=-1)`.  That is the lesson's layer with the input
columns of c_proj's weight read in blocks of the head width, last head first: a reparametrisation of W_o, not a
mistake (issue 28, "readings decided by evidence").
"""
import math

import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size)))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:T, :T] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        y = torch.cat([y[:, h] for h in reversed(range(self.n_head))], dim=-1)
        return self.c_proj(y)


TARGET = "CausalSelfAttention"
EXPECT = ()
