"""Buggy: no output projection; the concatenated heads are returned as they are.

Style: SDPA with three separate nn.Linear (to_q / to_k / to_v) and is_causal=True. The author thought
"concatenation combines the heads" (one of the lesson's misconceptions). Shapes are right; the layer has
d_out^2 + d_out parameters too few and the heads never interact.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class SDPAttention(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        if d_out % num_heads:
            raise ValueError("d_out must be divisible by num_heads")
        self.num_heads = num_heads
        self.context_length = context_length
        self.p = dropout
        self.to_q = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.to_k = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.to_v = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = (f(x).unflatten(-1, (self.num_heads, -1)).transpose(1, 2)
                   for f in (self.to_q, self.to_k, self.to_v))
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0.0, is_causal=True)
        return out.transpose(1, 2).flatten(-2)


TARGET = "SDPAttention"
EXPECT = ("param-count",)
DIAGNOSIS = "no-output-projection"  # the mutant this mistake should be diagnosed as
