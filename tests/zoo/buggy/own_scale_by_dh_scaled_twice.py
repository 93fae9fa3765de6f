"""Buggy (student style, scale-by-dh): the queries divided by sqrt(d_head), then their product with the keys divided
by sqrt(d_head) once more: the scores are divided by d_head in all.  Fused Wqkv viewed (B, N, 3, H, dh) and permuted,
scores by einsum, a boolean tril buffer `causal` inverted with ~.

From a student's trial: the line named was the second scaling, already right, and its fix ("/ math.sqrt(q.size(-1))")
was the same division in other words; applied, the report gave the line back as its own fix.  The line to change is
the first scaling, which is to be deleted (a fix in words).
"""
import math
import torch
import torch.nn as nn


class DoubleScaled(nn.Module):
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.Wqkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.Wo = nn.Linear(d_model, d_model)
        self.register_buffer("causal", torch.ones(max_len, max_len).tril().bool())

    def forward(self, x):
        B, N, D = x.shape
        q, k, v = self.Wqkv(x).view(B, N, 3, self.n_heads, self.d_head).permute(2, 0, 3, 1, 4)
        q = q / math.sqrt(self.d_head)
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(self.d_head)
        scores = scores.masked_fill(~self.causal[:N, :N], float("-inf"))
        attn = scores.softmax(dim=-1)
        out = torch.einsum("bhqk,bhkd->bhqd", attn, v)
        return self.Wo(out.transpose(1, 2).reshape(B, N, D))


TARGET = "DoubleScaled"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-by-dh"
LINE = 26
