"""Buggy (student style, mask-hides-diagonal): the mask buffer, registered over two lines, is torch.triu(ones) with
diagonal=0 written out on the second line, so it hides each token from itself too; the first token then sees
nothing (a row of -inf: NaN).  Found by a student trial: the report showed the first line only, without the
`diagonal=0` that is the mistake.

Style: Karpathy's `c_attn` (q, k, v in one projection), `c_proj`, `att`, a boolean buffer `mask`, not persistent.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("mask", torch.triu(torch.ones(block_size, block_size, dtype=torch.bool),
                                                diagonal=0), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


TARGET = "CausalSelfAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-hides-diagonal"
LINE = 22  # the buffer's first line (the triu), not the masked_fill (32) that uses it; the report shows both lines
WROTE = ('self.register_buffer("mask", torch.triu(torch.ones(block_size, block_size, dtype=torch.bool), '
         'diagonal=0), persistent=False)')
