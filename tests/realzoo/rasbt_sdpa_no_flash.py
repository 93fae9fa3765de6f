"""MHAPyTorchSDPAWithoutFlash from the book's bonus notebook: a boolean triu mask passed to F.scaled_dot_product_attention.

Source: https://github.com/rasbt/LLMs-from-scratch/blob/00c240ff87163731b336d97f91aeb2943f5b452d/ch03/02_bonus_efficient-multihead-attention/mha-implementations.ipynb (code cell id bad53538-e905-4065-ba0c-caacdfec5a0b, class MHAPyTorchSDPAWithoutFlash)
Licence: MIT (Copyright (c) 2023-2024 Sebastian Raschka)
Copied: verbatim (class only; imports added above)
Truth: BUG, inverted mask. The buffer is triu(ones, 1).bool() (True above the diagonal = the FUTURE), and it is passed as attn_mask to F.scaled_dot_product_attention, where a boolean True means "may attend". So every position attends only to strictly future positions and the last row is all False (a fully masked row; its value is backend dependent). Evidence: issue https://github.com/rasbt/LLMs-from-scratch/issues/1061 ("The attn_mask in this part seems not correct ... I think we need to use ~attn_mask", confirmed by the author) fixed by PR https://github.com/rasbt/LLMs-from-scratch/pull/1062 ("invert the boolean mask passed to scaled_dot_product_attention"). Also: for n > context_length it slices a mask of the wrong size (then SDPA raises).
"""
import torch
import torch.nn as nn

TARGET = "MHAPyTorchSDPAWithoutFlash"
TRUTH = "bug"
BUG = "sdpa-bool-mask-inverted"
RULE_GAPS = ()
FORWARD = "x"
NOTES = "Constructor (d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False). Fused self.qkv rows [W_q; W_k; W_v]; projection self.proj. The registered bool buffer 'mask' has the lesson's convention (True = masked), which is exactly why passing it to SDPA (True = keep) inverts it. The last query row has no allowed key at all (a fully masked row; on torch 2.13 CPU it comes out finite, not NaN - do not rely on NaN to detect it)."
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'sdpa-bool-mask'


class MHAPyTorchSDPAWithoutFlash(nn.Module):
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
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool())

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

        # Ensure attn_mask is compatible with expected shape and `batch_first=True`
        # No need to manually adjust for num_heads; ensure it's right for the sequence
        if self.context_length >= num_tokens:
            attn_mask = self.mask[:num_tokens, :num_tokens]
        else:
            attn_mask = self.mask[:self.context_length, :self.context_length]

        context_vec = nn.functional.scaled_dot_product_attention(
            queries, keys, values, attn_mask=attn_mask, dropout_p=use_dropout, is_causal=False)

        # Combine heads, where self.d_out = self.num_heads * self.head_dim
        context_vec = context_vec.transpose(1, 2).contiguous().view(batch_size, num_tokens, self.d_out)

        context_vec = self.proj(context_vec)

        return context_vec
