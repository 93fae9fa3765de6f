"""Buggy (student style, rope-before-split): Hugging Face's rotate_half rotary on a fused `qkv` projection, tables
`cos_cached`/`sin_cached` of the model width, heads as `n_head`/`head_size`; the queries and keys are turned over
the full width before they are split into heads."""
import math

import torch
import torch.nn as nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class FusedRotarySelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0, "n_embd must be divisible by n_head"
        self.n_head, self.head_size = n_head, n_embd // n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.out = nn.Linear(n_embd, n_embd)
        inv_freq = 1.0 / (10000 ** (torch.arange(0, n_embd, 2).float() / n_embd))
        emb = torch.cat((torch.outer(torch.arange(block_size).float(), inv_freq),) * 2, dim=-1)
        self.register_buffer("cos_cached", emb.cos())
        self.register_buffer("sin_cached", emb.sin())
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        cos, sin = self.cos_cached[:T], self.sin_cached[:T]
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        q = q.view(B, T, self.n_head, self.head_size).transpose(1, 2)
        k = k.view(B, T, self.n_head, self.head_size).transpose(1, 2)
        v = v.view(B, T, self.n_head, self.head_size).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_size))
        att = att.masked_fill(self.bias[:T, :T] == 0, float("-inf")).softmax(dim=-1)
        return self.out((att @ v).transpose(1, 2).contiguous().view(B, T, C))


TARGET = "FusedRotarySelfAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "rope-before-split"
LINE = 32
