"""Buggy (student style, mask-multiplied): the scores are multiplied by the lower-triangular matrix of ones, "to zero
out the future", before the softmax: a zeroed score still gets the weight e^0, so the future leaks.

Style: Karpathy-like names (`tril` of ones, `wei`, `hs ** -0.5`), separate bias-free `W_q` / `W_k` / `W_v`, an
output projection `proj`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.W_q = nn.Linear(n_embd, n_embd, bias=False)
        self.W_k = nn.Linear(n_embd, n_embd, bias=False)
        self.W_v = nn.Linear(n_embd, n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q = self.W_q(x).view(B, T, self.n_head, hs).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_head, hs).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * hs ** -0.5
        wei = wei * self.tril[:T, :T]
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "MultiHeadAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-multiplied"
LINE = 30
