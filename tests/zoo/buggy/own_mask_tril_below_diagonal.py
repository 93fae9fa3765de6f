"""Buggy (student style, mask-hides-diagonal): the `tril` buffer is built with diagonal=-1, so `tril == 0` hides each
token from itself as well as the future; the first token then sees nothing (a row of -inf: NaN).

Style: Karpathy's `wei` / `tril`, `W_q` / `W_k` / `W_v`, an output `proj`.  The mistake is in __init__, where the
buffer is built (LINE), not at the masked_fill in forward that uses it (issue 28, item 6).
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
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size), diagonal=-1))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q = self.W_q(x).view(B, T, self.n_head, hs).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_head, hs).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * hs ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "MultiHeadAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-hides-diagonal"
LINE = 21  # the buffer's construction, not the masked_fill (30) that uses it
