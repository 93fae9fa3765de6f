"""Buggy (mask lets one future token): the keep-mask is `torch.tril(ones, diagonal=1)`, so each token also sees the
token right after it.

Style: a TorchScript-minded student whose factory `build(d_model, n_heads, block_size)` returns
`torch.jit.script(layer)`: nanoGPT's fused `qkv` split by `.split(C, dim=2)`, a (1, 1, L, L) `bias` keep-mask buffer
compared with `== 0`, an output projection `o`. From a student trial (issue 28): mha-check's reading of the
parameters asked the scripted module for a submodule, which TorchScript refuses, so construct could not tell and
this leak ended with zero failing checks.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class ScriptableMHA(nn.Module):
    def __init__(self, d_model: int, n_heads: int, block_size: int):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.o = nn.Linear(d_model, d_model)
        keep = torch.tril(torch.ones(block_size, block_size), diagonal=1)
        self.register_buffer("bias", keep.view(1, 1, block_size, block_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        k = k.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        v = v.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d_head))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.o(y)


def build(d_model: int, n_heads: int, block_size: int):
    return torch.jit.script(ScriptableMHA(d_model, n_heads, block_size))


TARGET = "build"
EXPECT = ("causal-leakage",)
DIAGNOSIS = "mask-lets-one-future"
