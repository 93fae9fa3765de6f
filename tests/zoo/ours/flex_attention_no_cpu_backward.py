"""Correct, with PyTorch's FlexAttention: a causal score_mod, one fused `qkv`, `proj` out, the divisibility guard.

FlexAttention has no backward on the CPU ("FlexAttention does not support backward on CPU"), refuses the meta device,
and under mha-check's device recorder Dynamo cannot trace it ("Unsupported"): every check that needs gradients, or
the device run, meets a limit of torch, inside torch, not a mistake in this file.  Those checks are cannot tell,
naming the limit; the forward-only checks decide, and pass.  (Before: four failing checks, "your code raised".)
"""
import torch
import torch.nn as nn
from torch.nn.attention.flex_attention import flex_attention

TARGET = "FlexCausalAttention"
CANNOT_TELL = ("causal-leakage", "gradient-match", "parameters-used", "mask-buffer")
SAYS = ("does not support backward on CPU", "a limit of torch")
ARG = None


def causal(score, b, h, q_idx, kv_idx):
    return torch.where(q_idx >= kv_idx, score, -float("inf"))


class FlexCausalAttention(nn.Module):
    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2) for t in (q, k, v))
        y = flex_attention(q, k, v, score_mod=causal)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))
