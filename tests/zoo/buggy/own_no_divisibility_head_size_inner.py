"""Buggy (student style, no-divisibility-check): nothing checks that the heads divide the width; the head width is
`n_embd // n_head` and the projections are built head_size * n_head wide, so CausalSelfAttention(10, 3, ...) builds
heads of 3 features covering 9 of the 10, without a word.  For a width the heads divide it is correct.

Style: Karpathy's `head_size`, `wei` and `tril`, W_q / W_k / W_v and `proj`.

The student-style zoo's (own_*) no-divisibility-check: the report names it at the `def __init__` line, where the guard
belongs (the first projection built with the truncated width, line 22, is the trace's evidence), and its fix is a
statement to add at the top of __init__ (the divisibility check's guard, in this class's own names), which no
one-line change of a line can be: told in words, and read as words by tests/e2e/test_own_fix.py.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.n_head, self.head_size = n_head, n_embd // n_head
        inner = self.head_size * n_head
        self.W_q = nn.Linear(n_embd, inner, bias=False)
        self.W_k = nn.Linear(n_embd, inner, bias=False)
        self.W_v = nn.Linear(n_embd, inner, bias=False)
        self.proj = nn.Linear(inner, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        q = self.W_q(x).view(B, T, self.n_head, self.head_size).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_head, self.head_size).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_head, self.head_size).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * self.head_size ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).reshape(B, T, -1)
        return self.proj(out)


TARGET = "CausalSelfAttention"
EXPECT = ("divisibility",)
DIAGNOSIS = "no-divisibility-check"
LINE = 18  # def __init__, where the guard belongs (the first parameter built with the truncated width is line 22)
