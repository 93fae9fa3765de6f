"""Buggy: the input is transposed in place (x.transpose_(0, 1)) to feed a sequence-first nn.MultiheadAttention.

Style: wrapper around torch.nn.MultiheadAttention with the default batch_first=False, so the author converts to
(T, B, E) and back. The output is correct, but `transpose_` rewrote the caller's tensor: after the call the
caller's x has shape (T, B, E). (It also raises when x is a leaf that requires grad, because in-place ops on such
leaves are forbidden.)
"""
import torch
import torch.nn as nn


class SeqFirstAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, max_len=256, dropout=0.0):
        super().__init__()
        self.mha = nn.MultiheadAttention(embed_dim, num_heads, dropout=dropout)
        self.register_buffer("causal_mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        x = x.transpose_(0, 1)  # (B, T, E) -> (T, B, E), what nn.MultiheadAttention expects
        T = x.size(0)
        out, _ = self.mha(x, x, x, attn_mask=self.causal_mask[:T, :T], need_weights=False)
        return out.transpose(0, 1)


TARGET = "SeqFirstAttention"
EXPECT = ("input-untouched",)
DIAGNOSIS = "input-modified-in-place"  # the mutant this mistake should be diagnosed as
