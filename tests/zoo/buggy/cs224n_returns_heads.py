"""Buggy: forward returns the per-head outputs `att @ v`, (B, nh, T, hs), without merging the heads back into
(B, T, C): an output-shape failure, whichever way forward is called.

Style: CS224n / minGPT-like course code: three nn.Linear named query, key, value (with biases), heads split with
view(B, T, nh, hs).transpose(1, 2), forward(x, mask=None) whose optional mask (1 = may attend) defaults to the
layer's own causal mask, and NO output projection: the merged heads are returned as they are (the lesson's rule,
caught by param-count). There is no W_o: the parameters are read as W_q, W_k, W_v alone (W_o the identity), a
reading used only once the lesson's math or a known mistake reproduces the layer under it; with the output's shape
wrong none does, the weight checks are skipped behind output-shape, and the weight-free ones (output shape, leakage
by gradient, batch independence, eval determinism, input untouched, mask device) decide: output-shape fails with the
shape it got.
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
        att = att.masked_fill(mask == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_drop(att)
        y = att @ v  # (B, nh, T, hs)
        return y


TARGET = "CausalSelfAttention"
EXPECT = ("output-shape", "param-count")
DIAGNOSIS = "no-output-projection"
