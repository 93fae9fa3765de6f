"""Buggy (two mistakes at once, no-scaling and no-output-projection made and never applied): nanoGPT's layer
written from memory, the scores never divided by sqrt(hs) and `self.c_proj` made in __init__ but never applied.

Style: nanoGPT (fused c_attn, c_proj, `bias` tril buffer, resid_dropout on the output).  parameters-used finds
c_proj's parameters without a gradient; that finding, "unused parameter", was weights-under-no-grad's signature, so
the report named "attention weights computed inside torch.no_grad()" for a layer with no no_grad at all (issue 28).
Now the two mistakes are named from the numbers, each at its line: the weight reading takes W_o from c_proj, and the
lesson's layer without its W_o and without its scale computes the output.
"""
import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.0):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
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
        att = q @ k.transpose(-2, -1)
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(y)


TARGET = "CausalSelfAttention"
EXPECT = ("reference-match", "gradient-match", "parameters-used")
DIAGNOSIS = ("no-scaling", "no-output-projection")  # two mistakes at once: both named, each at its line
LINES = (32, 37)
