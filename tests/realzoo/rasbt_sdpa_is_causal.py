"""MHAPyTorchScaledDotProduct from the book's bonus notebook: fused qkv + F.scaled_dot_product_attention(is_causal=True).

Source: https://github.com/rasbt/LLMs-from-scratch/blob/00c240ff87163731b336d97f91aeb2943f5b452d/ch03/02_bonus_efficient-multihead-attention/mha-implementations.ipynb (code cell id 1b8e5a0d-1f65-4a03-bf6e-723f0cc428f5, class MHAPyTorchScaledDotProduct)
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka)
Copied: verbatim (class only; imports added above)
Truth: correct. qkv = Linear(d_in, 3*d_out) with [W_q; W_k; W_v] row blocks, view(b, n, 3, H, dh).permute(2, 0, 3, 1, 4), SDPA with is_causal=True (default scale 1/sqrt(dh)), dropout only when self.training, merge with self.d_out, proj Linear(d_out, d_out) with bias. No mask buffer at all (so no context-length limit).
"""
import torch
import torch.nn as nn

TARGET = "MHAPyTorchScaledDotProduct"
TRUTH = "correct"
BUG = None
RULE_GAPS = ()
FORWARD = "x"
NOTES = "Constructor (d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False); context_length is stored but unused (no mask buffer; causality via is_causal=True). self.dropout is a float, not an nn.Dropout. Fused self.qkv weight rows = [W_q; W_k; W_v]; output projection named self.proj."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None


class MHAPyTorchScaledDotProduct(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()

        assert d_out % num_heads == 0, "d_out is indivisible by num_heads"

        self.num_heads = num_heads
        self.context_length = context_length
        self.head_dim = d_out // num_heads
        self.d_out = d_out

        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.proj = nn.Linear(d_out, d_out)
        self.dropout = dropout

    def forward(self, x):
        batch_size, num_tokens, embed_dim = x.shape

        # (b, num_tokens, embed_dim) --> (b, num_tokens, 3 * embed_dim)
        qkv = self.qkv(x)

        # (b, num_tokens, 3 * embed_dim) --> (b, num_tokens, 3, num_heads, head_dim)
        qkv = qkv.view(batch_size, num_tokens, 3, self.num_heads, self.head_dim)

        # (b, num_tokens, 3, num_heads, head_dim) --> (3, b, num_heads, num_tokens, head_dim)
        qkv = qkv.permute(2, 0, 3, 1, 4)

        # (3, b, num_heads, num_tokens, head_dim) -> 3 times (b, num_heads, num_tokens, head_dim)
        queries, keys, values = qkv

        use_dropout = 0. if not self.training else self.dropout

        context_vec = nn.functional.scaled_dot_product_attention(
            queries, keys, values, attn_mask=None, dropout_p=use_dropout, is_causal=True)

        # Combine heads, where self.d_out = self.num_heads * self.head_dim
        context_vec = context_vec.transpose(1, 2).contiguous().view(batch_size, num_tokens, self.d_out)

        context_vec = self.proj(context_vec)

        return context_vec
