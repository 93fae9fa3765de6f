"""Correct: the single-head causal attention (one head of width d_out, no output projection) with one fused
q/k/v projection.

Style: nanoGPT habits on the previous lesson's layer. One `c_attn = nn.Linear(n_embd, 3 * head_size, bias=bias)`
split with `.split(head_size, dim=2)`, a bool tril buffer named `bias` (as nanoGPT calls its mask), scores scaled
with `1.0 / math.sqrt(k.size(-1))` before masking, masked where the tril is 0 with float('-inf'), F.softmax, and
attention dropout through nn.Dropout.  Constructor (n_embd, head_size, block_size, attn_pdrop=0.0, bias=False): no
number of heads, so it is the single-head form.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "SingleHeadSelfAttention"
EXPECT = ()


class SingleHeadSelfAttention(nn.Module):
    def __init__(self, n_embd, head_size, block_size, attn_pdrop=0.0, bias=False):
        super().__init__()
        self.head_size = head_size
        self.c_attn = nn.Linear(n_embd, 3 * head_size, bias=bias)
        self.attn_dropout = nn.Dropout(attn_pdrop)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size, dtype=torch.bool)))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.head_size, dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(~self.bias[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        return att @ v
