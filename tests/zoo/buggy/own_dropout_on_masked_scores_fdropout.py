"""Buggy (student style, dropout-on-masked-scores): `F.dropout` on the scores right after the masked_fill, before the
softmax, instead of on the weights after it; in train() mode with dropout > 0 it multiplies some -inf scores by 0,
and 0 * -inf is NaN.

Style: Karpathy's `wei` / `tril` (compared with 0), one fused `W_qkv` split with torch.split, `F.dropout` with
`training=self.training` and a float `self.drop_p`, a constructor of `emb_dim, num_heads, ctx_len, drop_p`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DropScores(nn.Module):
    def __init__(self, emb_dim, num_heads, ctx_len, drop_p=0.1):
        super().__init__()
        assert emb_dim % num_heads == 0
        self.num_heads, self.drop_p = num_heads, drop_p
        self.W_qkv = nn.Linear(emb_dim, 3 * emb_dim, bias=False)
        self.W_o = nn.Linear(emb_dim, emb_dim)
        self.register_buffer("tril", torch.tril(torch.ones(ctx_len, ctx_len)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = torch.split(self.W_qkv(x), C, dim=2)
        q, k, v = (t.view(B, T, self.num_heads, C // self.num_heads).transpose(1, 2) for t in (q, k, v))
        wei = q @ k.transpose(-2, -1) * (C // self.num_heads) ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.dropout(wei, p=self.drop_p, training=self.training)
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.W_o(out)


TARGET = "DropScores"
EXPECT = ("causal-leakage",)
DIAGNOSIS = "dropout-on-masked-scores"
LINE = 28
