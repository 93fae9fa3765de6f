"""Buggy (student style, d-out-ignored): the constructor takes an output width `out_features` and never uses it:
the fused projection, the heads and the output projection are all `in_features` wide, as in nanoGPT where the two
are one width, so the layer returns in_features features a token, not out_features.  With in_features ==
out_features the layer is right.

Style: torch.nn.Linear-like constructor words (`in_features`, `out_features`, `num_heads`, `max_positions`), one
fused `qkv` Linear unbound into q, k, v after a permute, scores by torch.matmul, a float `causal` buffer of 0 and
-inf added to the scores, `out` for the output projection.
"""
import torch
import torch.nn as nn


class WidthKeeper(nn.Module):
    def __init__(self, in_features, out_features, num_heads, max_positions):
        super().__init__()
        assert in_features % num_heads == 0
        self.num_heads = num_heads
        self.qkv = nn.Linear(in_features, 3 * in_features)
        self.out = nn.Linear(in_features, in_features)
        causal = torch.full((max_positions, max_positions), float("-inf")).triu(diagonal=1)
        self.register_buffer("causal", causal)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.num_heads, d // self.num_heads).permute(2, 0, 3, 1, 4).unbind(0)
        scores = torch.matmul(q, k.transpose(-1, -2)) / (d // self.num_heads) ** 0.5 + self.causal[:n, :n]
        ctx = torch.matmul(scores.softmax(-1), v).transpose(1, 2).reshape(b, n, d)
        return self.out(ctx)


TARGET = "WidthKeeper"
EXPECT = ("output-shape",)
DIAGNOSIS = "d-out-ignored"
LINE = 19
