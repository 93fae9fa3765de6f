"""Buggy (finite-fill, with the heads merged in reverse order): the future is filled with -10 instead of -inf, a
leak the outputs show, and the heads are concatenated last head first before the output projection.

Style: nanoGPT's CausalSelfAttention(config) with a fused `c_attn` (rows q; k; v), a `bias` tril buffer, the
scale written `* (1.0 / math.sqrt(k.size(-1)))` and `c_proj`; the merge is `torch.cat([y[:, h] for h in
reversed(range(self.n_head))], dim=-1)`.  The reversed merge alone is the lesson's layer with c_proj's input
columns read last head first (tests/zoo/correct/heads_merged_reversed.py); the fill is the mistake.  (A fill of
-100 leaves the outputs the reference's: that layer is read as correct math, and causal-leakage names the fill.)
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
        att = att.masked_fill(self.bias[:T, :T] == 0, -10.0)
        y = F.softmax(att, dim=-1) @ v
        y = torch.cat([y[:, h] for h in reversed(range(self.n_head))], dim=-1)
        return self.c_proj(y)


TARGET = "CausalSelfAttention"
EXPECT = ("causal-leakage", "reference-match", "gradient-match")
DIAGNOSIS = "finite-fill"  # the mutant this mistake should be diagnosed as
