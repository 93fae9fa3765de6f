"""Autoformer's (thuml) vanilla-Transformer attention: AttentionLayer(attention, d_model, n_heads) takes the inner attention MODULE as its first argument; FullAttention(mask_flag=True) works on (B, L, H, E) tensors with einsum and builds its own causal mask when attn_mask is None.

Source: https://github.com/thuml/Autoformer/blob/51c7d416ae120b805fd5beef2f4ccf7de496a6ff/layers/SelfAttention_Family.py (classes FullAttention and AttentionLayer; the file last changed in 1227b87, "remove unused and duplicated imports", 2024-01-12) and utils/masking.py (class TriangularCausalMask). models/Transformer.py builds the decoder self-attention as AttentionLayer(FullAttention(True, configs.factor, attention_dropout=configs.dropout, output_attention=False), configs.d_model, configs.n_heads) and calls it with attn_mask=None.
Licence: MIT (Copyright (c) 2021 THUML @ Tsinghua University), LICENSE at the repository root.
Copied: verbatim, the file's first five lines (imports; its `from utils.masking import TriangularCausalMask, ProbMask` and `from reformer_pytorch import LSHSelfAttention` are left out), class FullAttention and class AttentionLayer, taken from `git show 51c7d41:layers/SelfAttention_Family.py` in the fetched history; the search index holds the same file at 1227b87 (read_file, same classes). ProbAttention and ReformerLayer are left out. ADDED: class TriangularCausalMask copied verbatim from utils/masking.py at the same commit (in place of the import), this entry's constants after the imports, and below the copied block the factory build(d_model, n_heads, dropout=0.0) (TARGET), which wires the two classes as models/Transformer.py does for the decoder self-attention.
Truth: correct causal multi-head attention when called as m(x, x, x, None): query/key/value_projection Linear(d_model, d_model) with bias, view(B, L, H, -1) (no transpose: heads stay on axis 2), scores = einsum("blhe,bshe->bhls"), masked_fill_(triu(ones, 1), -inf) on the RAW scores, then softmax(scale * scores) with scale = 1/sqrt(E) (scaling after the fill: -inf stays -inf), einsum("bhls,bshd->blhd") back to (B, L, H, D), view(B, L, -1), out_projection with bias. Returns (out, None). No divisibility check (d_keys = d_model // n_heads), no context length (the mask is built per call).
"""
import torch
import torch.nn as nn

import numpy as np
from math import sqrt

TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-divisibility-check", "inner-attention-module-argument", "required-mask-argument-none-means-causal",
             "tuple-output", "no-context-length")
FORWARD = "queries, keys, values, attn_mask"
NOTES = ("AttentionLayer(attention, d_model, n_heads, d_keys=None, d_values=None): the inner attention is a module "
         "passed in; build(d_model, n_heads, dropout=0.0) passes FullAttention(True, 5, attention_dropout=dropout, "
         "output_attention=False). forward(queries, keys, values, attn_mask): attn_mask REQUIRED positionally, None = "
         "causal (a TriangularCausalMask is built); a given mask must have a .mask attribute. Returns (out, None). "
         "Weights query_projection, key_projection, value_projection, out_projection, all with bias.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = 'correct and causal when called as m(x, x, x, None) (the inner FullAttention builds the triangular mask itself); one lesson rule broken: no divisibility check (named, truly absent)'


# ------------------------------------------------- added for the zoo: copied from utils/masking.py (was imported)
class TriangularCausalMask():
    def __init__(self, B, L, device="cpu"):
        mask_shape = [B, 1, L, L]
        with torch.no_grad():
            self._mask = torch.triu(torch.ones(mask_shape, dtype=torch.bool), diagonal=1).to(device)

    @property
    def mask(self):
        return self._mask


# ------------------------------------------------------------------ copied from layers/SelfAttention_Family.py
class FullAttention(nn.Module):
    def __init__(self, mask_flag=True, factor=5, scale=None, attention_dropout=0.1, output_attention=False):
        super(FullAttention, self).__init__()
        self.scale = scale
        self.mask_flag = mask_flag
        self.output_attention = output_attention
        self.dropout = nn.Dropout(attention_dropout)

    def forward(self, queries, keys, values, attn_mask):
        B, L, H, E = queries.shape
        _, S, _, D = values.shape
        scale = self.scale or 1. / sqrt(E)

        scores = torch.einsum("blhe,bshe->bhls", queries, keys)

        if self.mask_flag:
            if attn_mask is None:
                attn_mask = TriangularCausalMask(B, L, device=queries.device)

            scores.masked_fill_(attn_mask.mask, -np.inf)

        A = self.dropout(torch.softmax(scale * scores, dim=-1))
        V = torch.einsum("bhls,bshd->blhd", A, values)

        if self.output_attention:
            return (V.contiguous(), A)
        else:
            return (V.contiguous(), None)


class AttentionLayer(nn.Module):
    def __init__(self, attention, d_model, n_heads, d_keys=None,
                 d_values=None):
        super(AttentionLayer, self).__init__()

        d_keys = d_keys or (d_model // n_heads)
        d_values = d_values or (d_model // n_heads)

        self.inner_attention = attention
        self.query_projection = nn.Linear(d_model, d_keys * n_heads)
        self.key_projection = nn.Linear(d_model, d_keys * n_heads)
        self.value_projection = nn.Linear(d_model, d_values * n_heads)
        self.out_projection = nn.Linear(d_values * n_heads, d_model)
        self.n_heads = n_heads

    def forward(self, queries, keys, values, attn_mask):
        B, L, _ = queries.shape
        _, S, _ = keys.shape
        H = self.n_heads

        queries = self.query_projection(queries).view(B, L, H, -1)
        keys = self.key_projection(keys).view(B, S, H, -1)
        values = self.value_projection(values).view(B, S, H, -1)

        out, attn = self.inner_attention(
            queries,
            keys,
            values,
            attn_mask
        )
        out = out.view(B, L, -1)

        return self.out_projection(out), attn


# ---------------------------------------------------------------------------------------------- added for the zoo
def build(d_model, n_heads, dropout=0.0):
    return AttentionLayer(FullAttention(True, 5, attention_dropout=dropout, output_attention=False), d_model, n_heads)
