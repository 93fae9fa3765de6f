"""Buggy (student style, mask-dict-cache): masks cached per length in a plain dict (never moved, never saved)."""
import torch
import torch.nn as nn


class MHA(nn.Module):
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        self.n_heads, self.hd = n_heads, d_model // n_heads
        self.Wq, self.Wk = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.Wv, self.Wo = nn.Linear(d_model, d_model), nn.Linear(d_model, d_model)
        self.masks = {t: torch.ones(t, t, dtype=torch.bool).triu(1) for t in range(1, max_len + 1)}

    def forward(self, x):
        B, T, D = x.shape
        sp = lambda t: t.view(B, T, self.n_heads, self.hd).transpose(1, 2)
        q, k, v = sp(self.Wq(x)), sp(self.Wk(x)), sp(self.Wv(x))
        att = (q @ k.transpose(-2, -1) / self.hd ** 0.5).masked_fill(self.masks[T], float("-inf"))
        return self.Wo((att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


TARGET = "MHA"
EXPECT = ("mask-buffer", "registered")
DIAGNOSIS = "mask-dict-cache"
LINE = 12
