"""MultiHeadAttentionCombinedQKV from the book's bonus notebook (one fused qkv Linear, [q;k;v] blocks).

Source: https://github.com/rasbt/LLMs-from-scratch/blob/00c240ff87163731b336d97f91aeb2943f5b452d/ch03/02_bonus_efficient-multihead-attention/mha-implementations.ipynb (code cell id 9a6bd0a2-f27c-4602-afa0-c96cd295c1a6, class MultiHeadAttentionCombinedQKV)
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka)
Copied: verbatim (class only; imports added above)
Truth: for d_in == d_out it is the lesson's MHA: qkv = Linear(d_in, 3*d_out) whose output rows are [W_q; W_k; W_v] (view(b, n, 3, H, dh) -> permute(2, 0, 3, 1, 4)), scaled by sqrt(dh), -inf triu mask, out proj Linear(d_out, d_out) with bias. BUG: the merge uses view(batch_size, num_tokens, embed_dim) where embed_dim = x.shape[-1] = d_in, not d_out, so any layer with d_in != d_out fails in forward (RuntimeError from view) although the constructor accepts it. Evidence: the code itself (same defect still present at the mirror's HEAD be5e2a3, 2026-02-17; the sibling classes in the same notebook use self.d_out, and the analogous d_in != d_out defect of MHAEinsum was reported and fixed in #857/#893). Not separately reported upstream as far as found.
"""
import torch
import torch.nn as nn

TARGET = "MultiHeadAttentionCombinedQKV"
TRUTH = "bug"
BUG = "merge-view-d-in"
RULE_GAPS = ()
FORWARD = "x"
NOTES = "Constructor (d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False) - note num_heads BEFORE context_length, unlike Ch03_MHA. Fused self.qkv weight (3*d_out, d_in) = [W_q; W_k; W_v] (blocks of d_out rows). Output projection named self.proj. Only visible with d_in != d_out."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'merge-view-d-in'


class MultiHeadAttentionCombinedQKV(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()

        assert d_out % num_heads == 0, "d_out is indivisible by num_heads"

        self.num_heads = num_heads
        self.context_length = context_length
        self.head_dim = d_out // num_heads

        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)

        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1)
        )

    def forward(self, x):
        batch_size, num_tokens, embed_dim = x.shape

        # (b, num_tokens, embed_dim) --> (b, num_tokens, 3 * embed_dim)
        qkv = self.qkv(x)

        # (b, num_tokens, 3 * embed_dim) --> (b, num_tokens, 3, num_heads, head_dim)
        qkv = qkv.view(batch_size, num_tokens, 3, self.num_heads, self.head_dim)

        # (b, num_tokens, 3, num_heads, head_dim) --> (3, b, num_heads, num_tokens, head_dim)
        qkv = qkv.permute(2, 0, 3, 1, 4)

        # (3, b, num_heads, num_tokens, head_dim) -> 3 times (b, num_head, num_tokens, head_dim)
        queries, keys, values = qkv.unbind(0)

        # (b, num_heads, num_tokens, head_dim) --> (b, num_heads, num_tokens, num_tokens)
        attn_scores = queries @ keys.transpose(-2, -1)
        attn_scores = attn_scores.masked_fill(
            self.mask.bool()[:num_tokens, :num_tokens], -torch.inf
        )

        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        # (b, num_heads, num_tokens, num_tokens) --> (b, num_heads, num_tokens, head_dim)
        context_vec = attn_weights @ values

        # (b, num_heads, num_tokens, head_dim) --> (b, num_tokens, num_heads, head_dim)
        context_vec = context_vec.transpose(1, 2)

        # (b, num_tokens, num_heads, head_dim) --> (b, num_tokens, embed_dim)
        context_vec = context_vec.contiguous().view(batch_size, num_tokens, embed_dim)

        context_vec = self.proj(context_vec)

        return context_vec
