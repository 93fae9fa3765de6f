"""Buggy (student style, mask-inverted): a wrapper around nn.MultiheadAttention given torch.tril(ones) as its
boolean attn_mask, "True where attention is allowed" - scaled_dot_product_attention's convention, the opposite of
nn.MultiheadAttention's (True = may NOT attend), so the past and each token's own key are hidden and the future is
kept.

student10's trial: the mapping said a known mistake reproduced the output, yet the report said "no known mistake
matches": under autograd torch >= 2.5 gives the last token's fully masked row zero weights (its output the
projection's bias), not mask-inverted's NaN, so the numbers were refused; and trace marked nothing, as the fused
mask of nn.MultiheadAttention was never read.
"""
import torch
import torch.nn as nn


class TorchCausalMHA(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.0):
        super().__init__()
        self.mha = nn.MultiheadAttention(d_model, n_heads, dropout=dropout, batch_first=True)

    def forward(self, x):
        T = x.size(1)
        # True where attention is allowed (causal: only look back)
        attn_mask = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        out, _ = self.mha(x, x, x, attn_mask=attn_mask, need_weights=False)
        return out


TARGET = "TorchCausalMHA"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-inverted"
LINE = 23
