"""Buggy (student style, mask-added): a float 0/1 buffer `causal_mask` made with triu(ones, diagonal=1), added to the
scores, which shifts the future's scores by +1 and hides nothing.  Fused qkv chunked in three, heads by view and
transpose, `att` for the scores.

From a student's trial: the fix was told in words ("masked_fill where the mask hides a position"); the student wrote
masked_fill(self.causal_mask[:N, :N], float("-inf")) on the float mask, which raises.  The fix is now their line with
the mask made boolean.
"""
import torch
import torch.nn as nn


class MaskedMHA(nn.Module):
    def __init__(self, width, n_heads, max_len):
        super().__init__()
        assert width % n_heads == 0, "width must be divisible by n_heads"
        self.n_heads = n_heads
        self.qkv = nn.Linear(width, 3 * width)
        self.o = nn.Linear(width, width)
        self.register_buffer("causal_mask", torch.triu(torch.ones(max_len, max_len), diagonal=1))

    def forward(self, x):
        B, N, W = x.shape
        h = self.n_heads
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(B, N, h, W // h).transpose(1, 2) for t in (q, k, v))
        att = q @ k.transpose(-1, -2) / (W // h) ** 0.5
        att = att + self.causal_mask[:N, :N]
        att = att.softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, N, W)
        return self.o(y)


TARGET = "MaskedMHA"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-added"
LINE = 28
