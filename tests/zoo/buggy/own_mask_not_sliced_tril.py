"""Buggy (student style, mask-not-sliced): the (block_size, block_size) tril buffer is used whole, not cut to the
sequence, so any input shorter than block_size raises a shape error.

Style: Karpathy's `wei` / `tril`, a fused `c_attn` split with `.split`, an output `proj`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * (1.0 / (k.size(-1) ** 0.5))
        wei = wei.masked_fill(self.tril == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        y = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


TARGET = "CausalSelfAttention"
EXPECT = ("output-shape",)
DIAGNOSIS = "mask-not-sliced"
LINE = 27
