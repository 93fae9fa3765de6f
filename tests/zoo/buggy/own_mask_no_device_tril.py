"""Buggy (student style, mask-no-device): the mask is made in forward with torch.tril(torch.ones(T, T)), on the
CPU whatever device the scores are on, so the layer fails on a GPU (and on the meta device).

Style: `W_q` / `W_k` / `W_v` / `W_o`, scores `wei`, a mask `tril` made on the fly, `F.softmax`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MHA(nn.Module):
    def __init__(self, d_model, n_heads):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape
        q = self.W_q(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) / self.d_k ** 0.5
        tril = torch.tril(torch.ones(T, T))
        wei = wei.masked_fill(tril == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        return self.W_o((wei @ v).transpose(1, 2).reshape(B, T, C))


TARGET = "MHA"
EXPECT = ("mask-buffer",)
DIAGNOSIS = "mask-no-device"
LINE = 27
