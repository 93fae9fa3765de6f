"""Buggy (dropout before the softmax): `att = att.masked_fill(mask, float('-inf')); att = self.attn_drop(att);
att = att.softmax(-1)`, the dropout moved from the weights to the masked scores.

Style: nanoGPT-like fused `c_attn` split into q, k, v, a 0/1 `bias` tril buffer of shape (1, 1, L, L) compared with
0, `attn_drop` / `resid_drop` modules. From a user trial: in eval() mode and with dropout 0 the layer is right, so
mha-check (whose train-mode probe set every dropout to 0) gave it full marks; in train() mode with dropout > 0,
dropout multiplies some of the -inf scores by 0, 0 * -inf is NaN, and training is NaN from its first step.
"""
import math

import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.1):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_drop = nn.Dropout(dropout)
        self.resid_drop = nn.Dropout(dropout)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_drop(att)  # dropout on the masked scores: 0 * -inf = NaN in training
        att = att.softmax(dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_drop(self.c_proj(y))


TARGET = "CausalSelfAttention"
EXPECT = ("causal-leakage",)
DIAGNOSIS = "dropout-on-masked-scores"  # the mutant this mistake should be diagnosed as
