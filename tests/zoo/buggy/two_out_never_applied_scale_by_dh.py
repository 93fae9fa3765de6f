"""Buggy (two mistakes at once, scale-by-dh and no-output-projection made and never applied): the scores divided
by d_k instead of sqrt(d_k), and the output projection `self.out` made in __init__ but never applied.

Style: a tutorial's fused `qkv` chunked in three, reshape/permute, torch.matmul, a keep-mask buffer `causal`, and
the output projection named `out` (not c_proj, out_proj or W_o).  Before, parameters-used's "unused parameter" was
read as weights-under-no-grad (issue 28).
"""
import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len, dropout=0.1):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len)))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(b, t, self.n_heads, self.d_k).permute(0, 2, 1, 3)
        k = k.reshape(b, t, self.n_heads, self.d_k).permute(0, 2, 1, 3)
        v = v.reshape(b, t, self.n_heads, self.d_k).permute(0, 2, 1, 3)
        scores = torch.matmul(q, k.transpose(-1, -2)) / self.d_k
        scores = scores.masked_fill(self.causal[:t, :t] == 0, float("-inf"))
        attn = self.drop(torch.softmax(scores, dim=-1))
        ctx = torch.matmul(attn, v).permute(0, 2, 1, 3).reshape(b, t, c)
        return ctx


TARGET = "MultiHeadAttention"
EXPECT = ("reference-match", "gradient-match", "parameters-used")
DIAGNOSIS = ("scale-by-dh", "no-output-projection")  # two mistakes at once: both named, each at its line
LINES = (29, 33)
