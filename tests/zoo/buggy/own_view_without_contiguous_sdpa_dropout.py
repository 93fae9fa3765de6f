"""Buggy (student style, view-without-contiguous): scaled_dot_product_attention with dropout_p in training, then
`y.transpose(1, 2).view(B, T, C)` without `.contiguous()`.  In eval() mode SDPA's CPU kernel returns its output laid
out so that the view works; with dropout > 0 it takes another path, and the view raises: the layer cannot be
trained.  Found by a student's trial: contiguity passed (it ran eval() mode only), and causal-leakage's train-mode
probe met the error and told the student to move their dropout.  contiguity now runs one forward in train() mode
with dropout, and the line comes from the exception (the trace records eval() mode).

Style: a fused `qkv` split with `.split(C, dim=-1)`, a generator over (q, k, v), `self.dropout` a float.
"""
import torch.nn as nn
import torch.nn.functional as F


class FlashMHA(nn.Module):
    def __init__(self, d_model, n_heads, dropout=0.1):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out = nn.Linear(d_model, d_model)
        self.dropout = dropout

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        y = y.transpose(1, 2).view(B, T, C)
        return self.out(y)


TARGET = "FlashMHA"
EXPECT = ("contiguity", "causal-leakage")
DIAGNOSIS = "view-without-contiguous"
LINE = 28  # the view after the transpose
