"""Buggy: scores divided by the head dimension d_k instead of sqrt(d_k).

Style: einsum with nn.Linear projections (proj_q / proj_k / proj_v / proj_out) and a registered bool tril buffer.
The author remembered "divide by the dimension". The mask, the split and the merge are all right; only the
softmax temperature is wrong (sqrt(d_k) times too flat).
"""
import torch
import torch.nn as nn


class ScaledAttention(nn.Module):
    def __init__(self, d_model, n_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.proj_q = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.proj_k = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.proj_v = nn.Linear(d_model, d_model, bias=qkv_bias)
        self.proj_out = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("allowed", torch.ones(context_length, context_length, dtype=torch.bool).tril())

    def forward(self, x):
        b, t, _ = x.shape
        q = self.proj_q(x).reshape(b, t, self.n_heads, self.d_k)
        k = self.proj_k(x).reshape(b, t, self.n_heads, self.d_k)
        v = self.proj_v(x).reshape(b, t, self.n_heads, self.d_k)
        logits = torch.einsum("bihd,bjhd->bhij", q, k) / self.d_k
        logits = logits.masked_fill(~self.allowed[:t, :t], float("-inf"))
        attn = self.drop(logits.softmax(dim=-1))
        out = torch.einsum("bhij,bjhd->bihd", attn, v).reshape(b, t, -1)
        return self.proj_out(out)


TARGET = "ScaledAttention"
EXPECT = ("reference-match",)
DIAGNOSIS = "scale-by-dh"  # the mutant this mistake should be diagnosed as
