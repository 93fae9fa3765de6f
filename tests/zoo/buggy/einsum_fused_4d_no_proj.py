"""Buggy (no-output-projection): one fused 4-D parameter W of shape (d, 3, H, dh), the model width first, used as
einsum('btd,dshe->sbhte', x, W), and the heads concatenated and returned with no output projection.

Style: a Karpathy-like `tril` buffer and `wei`, raw parameters (a student's trial, issue 28).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "FusedNoProj"
EXPECT = ("param-count",)  # the missing output projection only
DIAGNOSIS = "no-output-projection"
MUST_PASS = ("output-shape", "causal-leakage", "batch-independence", "eval-determinism", "input-untouched",
             "reference-match", "gradient-match", "view-order")  # the weight checks, under the reading without W_o


class FusedNoProj(nn.Module):
    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.hs = n_heads, d_model // n_heads
        self.W = nn.Parameter(torch.randn(d_model, 3, n_heads, self.hs) * d_model ** -0.5)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = torch.einsum("btd,dshe->sbhte", x, self.W)
        wei = q @ k.transpose(-2, -1) * self.hs ** -0.5
        wei = F.softmax(wei.masked_fill(self.tril[:T, :T] == 0, float("-inf")), dim=-1)
        return (wei @ v).transpose(1, 2).reshape(B, T, C)
