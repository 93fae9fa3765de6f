"""Buggy (student style, forward(x, mask=None)): the causal mask the forward builds when no mask is given is made
from x.size(0), the batch, where x.size(1), the number of tokens, belongs.

Every check called the layer with the causal mask mha-check passes (its forward takes one), so the default path
its own callers get was never run, and every check passed (student10's trial).  Called as forward(x): causal
when B = n, a broadcasting error for other batches, and no mask at all for B = 1 (a (1, 1) mask of ones).
causal-leakage now calls it so too (`_default_mask_broken`).  No catalogued mistake is this one.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class MaskedSelfAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=False):
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.o_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x, mask=None):
        B, T, E = x.shape
        q = self.q_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is None:
            mask = torch.tril(torch.ones(x.size(0), x.size(0), device=x.device))
        scores = scores.masked_fill(mask == 0, float("-inf"))
        attn = F.softmax(scores, dim=-1)
        out = (attn @ v).transpose(1, 2).contiguous().view(B, T, E)
        return self.o_proj(out)


TARGET = "MaskedSelfAttention"
EXPECT = ("causal-leakage",)
DIAGNOSIS = None  # a default mask of the wrong size: no mutant is this mistake; causal-leakage says what is wrong
# (causal on (B=n), leaks on B=1, raises on others) and its fix fits
MUST_PASS = ("reference-match", "gradient-match", "output-shape", "mask-buffer")
