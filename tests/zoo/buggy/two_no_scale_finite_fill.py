"""Buggy (two mistakes at once, no-scaling and finite-fill): the scores are never divided by sqrt(hs), and the
future is filled with -1e-9 where the student meant -1e9 (a sign slip in the exponent), which hides nothing.

Style: per-projection `W_q` / `W_k` / `W_v`, `att`, an output `proj`.  Neither mistake alone reproduces the outputs;
the leak is the fill's, so the mask's line is the right place for that fix, and the missing scale is a second one.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
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
        att = q @ k.transpose(-2, -1)
        att = att.masked_fill(self.tril[:T, :T] == 0, -1e-9)
        att = F.softmax(att, dim=-1)
        out = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "Attention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = ("no-scaling", "finite-fill")  # two mistakes at once: both named, each at its line
LINES = (29, 30)
