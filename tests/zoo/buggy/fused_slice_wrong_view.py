"""Buggy: a fused projection is chunked into q, k, v, and each chunk is split into heads with view(B, nh, T, hs)
instead of view(B, T, nh, hs).transpose(1, 2).

Style: nanoGPT-like names (c_attn, n_head, T, hs) with `chunk` instead of `split`. On a separate projection this
view runs and mixes tokens into heads (split-view-order); on a chunk of a fused projection it raises "view size is
not compatible", because the chunk is a slice.  From a student trial: the report once named it
view-without-contiguous and advised `.contiguous()`, which would turn the error into silently wrong numbers.  The
right report says the view's order is wrong and names no catalogued mistake (none raises this way).
"""
import math

import torch
import torch.nn as nn


class ChunkedHeads(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.0):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        causal = torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size)
        self.register_buffer("bias", causal)

    def forward(self, x):
        B, T, C = x.size()
        hs = C // self.n_head
        q, k, v = self.c_attn(x).chunk(3, dim=-1)
        q = q.view(B, self.n_head, T, hs)
        k = k.view(B, self.n_head, T, hs)
        v = v.view(B, self.n_head, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(torch.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


TARGET = "ChunkedHeads"
EXPECT = ("contiguity",)
DIAGNOSIS = None
UNNAMED_OK = True  # no mutant raises this way: naming none is right, naming view-without-contiguous was wrong
