"""Buggy: an additive mask of ones: `att + (1 - mask)` adds +1 to every future score instead of -inf, so the
future gets e times the weight it would have unmasked (the fix: cs224n_mask_adds_one_fixed.py).

Style: CS224n / minGPT-like course code: three nn.Linear named query, key, value (with biases), heads split with
view(B, T, nh, hs).transpose(1, 2), forward(x, mask=None) whose optional mask (1 = may attend) defaults to the
layer's own causal mask, and NO output projection: the merged heads are returned as they are (the lesson's rule,
caught by param-count). There is no W_o: the parameters are read as W_q, W_k, W_v alone (W_o the identity, the
lesson's layer without its last step), a reading used once the lesson's math or a known mistake reproduces the layer
under it (issue 28 item 3), so the weight checks judge the rest of the layer beside the weight-free ones (output
shape, leakage by gradient, batch independence, eval determinism, input untouched, mask device): every way of
calling forward tried leaks, so causal-leakage fails.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, attn_pdrop=0.0):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.query = nn.Linear(n_embd, n_embd)
        self.key = nn.Linear(n_embd, n_embd)
        self.value = nn.Linear(n_embd, n_embd)
        self.attn_drop = nn.Dropout(attn_pdrop)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))  # 1 = may attend

    def forward(self, x, mask=None):
        B, T, C = x.size()
        q = self.query(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = self.key(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        v = self.value(x).view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
        if mask is None:
            mask = self.tril[:T, :T]
        att = att + (1 - mask)  # additive mask: push the future away
        att = F.softmax(att, dim=-1)
        att = self.attn_drop(att)
        y = att @ v  # (B, nh, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # merge the heads: (B, T, C)
        return y


TARGET = "CausalSelfAttention"
EXPECT = ("causal-leakage", "reference-match", "param-count")
DIAGNOSIS = ("mask-added", "no-output-projection")  # the leak's mistake, from the numbers read without W_o (W_o
# the identity), and the missing projection beside it (issue 28 item 3: before, no reading was certain, the weight
# checks could not tell, and the projection was not named)
