"""Buggy (two mistakes at once, mask-inverted and finite-fill-100): the masked_fill hides where `tril` is 1 (the
past and the token itself) instead of where it is 0, with a finite -1e4 instead of -inf.

Style: Karpathy's `wei` / `tril`, `W_q` / `W_k` / `W_v`, an output `proj`.  With -inf the last token's row would hide
every position and be NaN (output-shape fails: mask-inverted alone); with the finite fill that row is a plain average
over every token, so the output is finite and output-shape passes.  Neither mistake alone reproduces the output;
the two together do (torchtext's generate_square_subsequent_mask with its -1e8 fill is this, see tests/realzoo).
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
        wei = wei.masked_fill(self.tril[:T, :T] == 1, -1e4)
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "MultiHeadAttention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = ("finite-fill-100", "mask-inverted")  # two mistakes at once: both named, each at its line
LINES = (32, 32)  # one masked_fill holds both: its fill and its mask
