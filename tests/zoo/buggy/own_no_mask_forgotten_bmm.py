"""Buggy (student style, no-mask): the mask buffer is made in __init__ and never used: the scores go straight to
the softmax (found by a student's trial: the report named no-mask without a line; the line given now is the
softmax's, before which the mask belongs).

Style: heads folded into the batch for torch.bmm, `d_k`, a `tri` buffer.
"""
import torch
import torch.nn as nn


class BmmAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.wq, self.wk, self.wv = (nn.Linear(d_model, d_model) for _ in range(3))
        self.wo = nn.Linear(d_model, d_model)
        self.register_buffer("tri", torch.tril(torch.ones(max_len, max_len)))

    def _fold(self, t):
        B, T, _ = t.shape
        return t.view(B, T, self.n_heads, self.d_k).transpose(1, 2).reshape(B * self.n_heads, T, self.d_k)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self._fold(self.wq(x)), self._fold(self.wk(x)), self._fold(self.wv(x))
        scores = torch.bmm(q, k.transpose(1, 2)) / self.d_k ** 0.5
        attn = torch.softmax(scores, dim=-1)
        ctx = torch.bmm(attn, v).view(B, self.n_heads, T, self.d_k).transpose(1, 2).reshape(B, T, C)
        return self.wo(ctx)


TARGET = "BmmAttention"
EXPECT = ("causal-leakage", "reference-match", "gradient-match")
DIAGNOSIS = "no-mask"
LINE = 28
