"""Correct: a constructor that takes only `**cfg` and reads its settings with cfg.get("d_model", 64) and
cfg.get("n_heads", 4) (a student's trial: mha-check built it with no arguments, its default width 64 met inputs of
width 8, and the layer failed output-shape, param-count and divisibility on mha-check's own inputs).

Style: one fused `qkv` Linear split with .split(d, dim=2), a 4-D 0/1 `m` buffer, scores `a`, output `o`.
"""
import torch
import torch.nn as nn


class KwAttention(nn.Module):
    def __init__(self, **cfg):
        super().__init__()
        self.d = cfg.get("d_model", 64)
        self.nh = cfg.get("n_heads", 4)
        assert self.d % self.nh == 0, "d_model must be divisible by n_heads"
        self.qkv = nn.Linear(self.d, 3 * self.d, bias=cfg.get("qkv_bias", False))
        self.o = nn.Linear(self.d, self.d)
        L = cfg.get("context_length", 128)
        self.register_buffer("m", torch.tril(torch.ones(1, 1, L, L)))

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(self.d, dim=2)
        q = q.view(B, T, self.nh, D // self.nh).transpose(1, 2)
        k = k.view(B, T, self.nh, D // self.nh).transpose(1, 2)
        v = v.view(B, T, self.nh, D // self.nh).transpose(1, 2)
        a = (q @ k.transpose(-2, -1)) * (D // self.nh) ** -0.5
        a = a.masked_fill(self.m[:, :, :T, :T] == 0, float("-inf"))
        a = a.softmax(-1)
        y = (a @ v).transpose(1, 2).reshape(B, T, D)
        return self.o(y)


TARGET = "KwAttention"
EXPECT = ()
