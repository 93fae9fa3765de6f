"""Buggy (student style, mask-added): a 0/1 float keep-mask, tril(ones), given to scaled_dot_product_attention as
attn_mask, which SDPA adds to the scores (0 keeps, -inf hides): it hides nothing.  Found by a student's trial: named,
but with no line, a trace that marked nothing, and masked_fill's advice (`== 0`), which for SDPA, whose boolean mask
means "attend", is the future's.  Now marked where the mask is taken for the call, and the fix says `.bool()`.

Style: nanoGPT's `c_attn` split, SDPA over several lines, the mask a buffer named `attn_bias`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class FlashishAttention(nn.Module):
    def __init__(self, d_model, n_heads, context_length, p_drop=0.0):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.c_attn = nn.Linear(d_model, 3 * d_model)
        self.c_proj = nn.Linear(d_model, d_model)
        self.p_drop = p_drop
        # float mask for scaled_dot_product_attention
        self.register_buffer("attn_bias", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.c_attn(x).split(D, dim=2)
        q = q.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)
        k = k.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)
        v = v.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, k, v,
            attn_mask=self.attn_bias[:T, :T],
            dropout_p=self.p_drop if self.training else 0.0,
        )
        y = y.transpose(1, 2).contiguous().view(B, T, D)
        return self.c_proj(y)


TARGET = "FlashishAttention"
EXPECT = ("causal-leakage", "reference-match", "gradient-match")
DIAGNOSIS = "mask-added"
LINE = 32
WROTE = ("y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.attn_bias[:T, :T], "
         "dropout_p=self.p_drop if self.training else 0.0)")  # the call's five lines, joined (the comma its line
# break left before the closing bracket dropped: in a call it changes nothing)
