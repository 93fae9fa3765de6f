"""Buggy: the causal mask is a plain tensor attribute (self.mask = torch.tril(...)), not a registered buffer.

Style: separate query / key / value / out Linear layers with head splitting done via reshape + permute and the
(0 = hidden) tril mask compared with == 0. Numerically correct on CPU, but the mask is not moved by
module.to(device) / .cuda() and not in state_dict: forward after module.to("meta") (or to a GPU) fails with a
device mismatch.
"""
import math

import torch
import torch.nn as nn


class MaskedMultiHead(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.mask = torch.tril(torch.ones(context_length, context_length))

    def forward(self, x):
        b, t, _ = x.shape
        q = self.query(x).reshape(b, t, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        k = self.key(x).reshape(b, t, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        v = self.value(x).reshape(b, t, self.num_heads, self.head_dim).permute(0, 2, 1, 3)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(self.mask[:t, :t] == 0, float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        ctx = (weights @ v).permute(0, 2, 1, 3).reshape(b, t, -1)
        return self.out(ctx)


TARGET = "MaskedMultiHead"
EXPECT = ("mask-buffer",)
DIAGNOSIS = "mask-plain-attribute"  # the mutant this mistake should be diagnosed as
