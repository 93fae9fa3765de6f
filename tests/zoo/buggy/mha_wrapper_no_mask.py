"""Buggy (no-mask): a thin wrapper around torch.nn.MultiheadAttention that passes no attn_mask, so every token
attends to the future.

Style: "use the library" (tests/zoo/correct/mha_wrapper.py without its mask buffer).  The report's fix said to
mask the scores with masked_fill, which this layer never computes: the fix for it is nn.MultiheadAttention's own
attn_mask (is_causal=True alone raises there: it is only a hint beside attn_mask) (issue 28).
"""
import torch.nn as nn


class TorchCausalAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, max_len=512, dropout=0.0):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, dropout=dropout, bias=True, batch_first=True)

    def forward(self, x):
        out, _ = self.attn(x, x, x, need_weights=False)
        return out


TARGET = "TorchCausalAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "no-mask"
LINE = 17
