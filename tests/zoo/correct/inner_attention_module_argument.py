"""Correct in its math, one lesson rule broken: the attention kernel is a MODULE handed to the layer, and the layer's
mask argument is required, None meaning "build the causal mask yourself".

Stands for a real-code pattern (a time-series forecasting library's vanilla Transformer attention, removed from
tests/realzoo/ with the provenance clean-up): an outer layer AttentionLayer-like(inner, d_model, n_heads, d_keys=None,
d_values=None) owning the four projections, and an inner full-attention module (built with mask_flag=True) working
on (B, L, H, E) tensors with einsum, which makes its own triangular mask when the mask argument is None; the outer
forward(queries, keys, values, attn_mask) has no default for attn_mask; no check that the heads divide d_model.  The
model wires them as a factory does here.  Written from that description, in its own names.
"""
import math

import torch
import torch.nn as nn


class WholeSequenceAttention(nn.Module):
    def __init__(self, mask_flag=True, scale=None, attention_dropout=0.1):
        super().__init__()
        self.mask_flag = mask_flag
        self.scale = scale
        self.drop = nn.Dropout(attention_dropout)

    def forward(self, q, k, v, attn_mask):
        B, L, H, E = q.shape
        S = k.shape[1]
        scale = self.scale or 1.0 / math.sqrt(E)
        scores = torch.einsum("blhe,bshe->bhls", q, k)
        if self.mask_flag:
            if attn_mask is None:
                attn_mask = torch.triu(torch.ones(L, S, dtype=torch.bool, device=q.device), diagonal=1)
            scores = scores.masked_fill(attn_mask, -math.inf)
        probs = self.drop(torch.softmax(scale * scores, dim=-1))
        return torch.einsum("bhls,bshd->blhd", probs, v).contiguous()


class ProjectedAttention(nn.Module):
    def __init__(self, inner, d_model, n_heads, d_keys=None, d_values=None):
        super().__init__()
        d_keys = d_keys or (d_model // n_heads)
        d_values = d_values or (d_model // n_heads)
        self.inner = inner
        self.q_map = nn.Linear(d_model, d_keys * n_heads)
        self.k_map = nn.Linear(d_model, d_keys * n_heads)
        self.v_map = nn.Linear(d_model, d_values * n_heads)
        self.o_map = nn.Linear(d_values * n_heads, d_model)
        self.n_heads = n_heads

    def forward(self, queries, keys, values, attn_mask):
        B, L, _ = queries.shape
        S = keys.shape[1]
        H = self.n_heads
        q = self.q_map(queries).view(B, L, H, -1)
        k = self.k_map(keys).view(B, S, H, -1)
        v = self.v_map(values).view(B, S, H, -1)
        out = self.inner(q, k, v, attn_mask)
        return self.o_map(out.view(B, L, -1))


def build(d_model, n_heads, dropout=0.0):
    return ProjectedAttention(WholeSequenceAttention(True, attention_dropout=dropout), d_model, n_heads)


TARGET = "build"
EXPECT = ()
RULES_BROKEN = ("divisibility",)  # d_model // n_heads without a check
RULE_MISTAKE = "no-divisibility-check"
