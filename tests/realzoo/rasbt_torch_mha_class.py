"""MHAPyTorchClass from the book's bonus notebook: a wrapper around torch.nn.MultiheadAttention plus an extra projection.

Source: https://github.com/rasbt/LLMs-from-scratch/blob/00c240ff87163731b336d97f91aeb2943f5b452d/ch03/02_bonus_efficient-multihead-attention/mha-implementations.ipynb (code cell id 3799c7ef-3155-42c6-a829-f95656453ae0, class MHAPyTorchClass)
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka)
Copied: verbatim (class only; imports added above)
Truth: correct as a function for qkv_bias=False and d_in == d_out: nn.MultiheadAttention(embed_dim=d_out, bias=False) with a bool triu(1) attn_mask (nn.MultiheadAttention convention: True = NOT allowed, so here the bool mask is right), in_proj_weight rows [W_q; W_k; W_v], its own out_proj (Linear(d_out, d_out, bias=False)), then self.proj Linear(d_out, d_out) with bias. Two stacked output projections compose to one affine map: wo = proj.W @ out_proj.W, bo = proj.b. Caveats: d_in is ignored (input must already have width d_out); qkv_bias=True also sets add_bias_kv=True, which appends a learned extra key/value token that every query may attend to - not the lesson's layer.
"""
import torch
import torch.nn as nn

TARGET = "MHAPyTorchClass"
TRUTH = "correct"
BUG = None
RULE_GAPS = ()
FORWARD = "x"
NOTES = "Constructor (d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False, need_weights=True). d_in unused: requires d_in == d_out. Weights: multihead_attn.in_proj_weight (3*d_out, d_out) = [W_q; W_k; W_v], multihead_attn.out_proj (bias None when qkv_bias=False), then self.proj (with bias): two output projections in series. Do not test with qkv_bias=True (add_bias_kv adds an extra attended token). Divisibility is refused by nn.MultiheadAttention itself (AssertionError)."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'takes d_in but ignores it: forward raises for d_in != d_out'


class MHAPyTorchClass(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False, need_weights=True):
        super().__init__()

        self.context_length = context_length
        self.multihead_attn = nn.MultiheadAttention(
            embed_dim=d_out,
            num_heads=num_heads,
            dropout=dropout,
            bias=qkv_bias,
            add_bias_kv=qkv_bias,
            batch_first=True,
        )

        self.need_weights = need_weights
        self.proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool())

    def forward(self, x):
        batch_size, num_tokens, _ = x.shape

        # Ensure attn_mask is compatible with expected shape and `batch_first=True`
        # No need to manually adjust for num_heads; ensure it's right for the sequence
        if self.context_length >= num_tokens:
            attn_mask = self.mask[:num_tokens, :num_tokens]
        else:
            attn_mask = self.mask[:self.context_length, :self.context_length]

        # attn_mask broadcasting will handle batch_size dimension implicitly
        attn_output, _ = self.multihead_attn(
            x, x, x, attn_mask=attn_mask, need_weights=self.need_weights
        )

        output = self.proj(attn_output)

        return output
