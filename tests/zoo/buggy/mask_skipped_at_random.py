"""Buggy (a causal mask with entries skipped at random): `fut & (torch.rand(T, T) > 0.003)`, so each call lets about
0.3 % of the future positions through, different ones at every call.

Style: per-head Linear projections `q`, `k`, `v`, `o`, a lambda that splits heads, the mask built afresh in forward
(an attacker's trial, issue 27). The future leaks at random, so causal-leakage fails; two calls on one input differ,
so batch-independence fails too, and must say so ("differs between calls"), not read the difference between a
sequence alone and in the batch as the batch axis swapped: the layer has no such mistake, and no catalogued mistake is
a random mask, so none is named (before, the batch difference named batch-seq-swap, and earlier additive-mask-1e9).
"""
import torch
import torch.nn as nn


class Attn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.h, self.dh = num_heads, d_out // num_heads
        self.q = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.k = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.v = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.o = nn.Linear(d_out, d_out)

    def forward(self, x):
        B, T, _ = x.shape
        sp = lambda t: t.view(B, T, self.h, self.dh).transpose(1, 2)
        q, k, v = sp(self.q(x)), sp(self.k(x)), sp(self.v(x))
        s = q @ k.transpose(-2, -1) / self.dh ** 0.5
        fut = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), 1)
        fut = fut & (torch.rand(T, T, device=x.device) > 0.003)  # some future entries left unmasked, at random
        s = s.masked_fill(fut, float("-inf"))
        return self.o((s.softmax(-1) @ v).transpose(1, 2).reshape(B, T, -1))


TARGET = "Attn"
EXPECT = ("causal-leakage",)
DIAGNOSIS = None  # no catalogued mistake is a random mask: never batch-seq-swap, never additive-mask-1e9
