"""Buggy (student style, divisibility-inverted): `assert dim % heads, ...` reads as "dim must divide into heads",
but an assert passes on a true value, and `dim % heads` is true (non-zero) exactly when the heads do not divide the
width: every valid width is refused, and an indivisible one would be built.

Style: `dim`, `heads`, `max_len`, one fused `to_qkv` Linear chunked in three, the heads split with
rearrange-like permute(2, 0, 3, 1, 4) of a (b, n, 3, heads, dim_head) view, torch.baddbmm for the scaled scores of
the heads folded into the batch, a boolean `future` mask buffer, `to_out` for the output projection.
"""
import torch
import torch.nn as nn


class FusedQKV(nn.Module):
    def __init__(self, dim, heads, max_len):
        super().__init__()
        assert dim % heads, f"dim={dim} must be divisible by heads={heads}"
        self.heads, self.dim_head = heads, dim // heads
        self.to_qkv = nn.Linear(dim, 3 * dim)
        self.to_out = nn.Linear(dim, dim)
        self.register_buffer("future", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        b, n, dim = x.shape
        h, e = self.heads, self.dim_head
        q, k, v = self.to_qkv(x).view(b, n, 3, h, e).permute(2, 0, 3, 1, 4).reshape(3, b * h, n, e)
        empty = torch.zeros(b * h, n, n, dtype=x.dtype, device=x.device)
        att = torch.baddbmm(empty, q, k.transpose(1, 2), beta=0.0, alpha=e ** -0.5)
        att = att.masked_fill(self.future[:n, :n], float("-inf")).softmax(dim=-1)
        out = torch.bmm(att, v).view(b, h, n, e).transpose(1, 2).reshape(b, n, dim)
        return self.to_out(out)


TARGET = "FusedQKV"
EXPECT = ("construct",)
DIAGNOSIS = "divisibility-inverted"
LINE = 16
