"""Buggy: a softmax by hand with no row maximum, the mask multiplied into the exponentials: exp(wei) * tril /
sum.  The mask's 0 cancels the future's exponential, so ordinary outputs are the reference's, but a future score
large enough (about 89 in float32, 11 in float16) makes its exponential inf, and inf * 0 is NaN in every earlier
row: a future token can wreck the past.  No catalogued mistake (there is no fill at all).

Style: Karpathy-like names (`wei`, `tril`, `n_embd`, `n_head`, `block_size`), three Linear layers and `proj`, heads
split with view/transpose.  From a student's trial (trial6): the report named the finite-fill mistake from the 1e30
probe's NaN ("the future keeps a tiny weight, as a fill of -100 instead of -inf leaves"), though the future's weight
is exactly 0 until its exponential overflows; the trace marks the exponential's line instead.
"""
import torch
import torch.nn as nn


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.key = nn.Linear(n_embd, n_embd, bias=False)
        self.query = nn.Linear(n_embd, n_embd, bias=False)
        self.value = nn.Linear(n_embd, n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        k = self.key(x).view(B, T, self.n_head, hs).transpose(1, 2)
        q = self.query(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, hs).transpose(1, 2)
        wei = q @ k.transpose(-2, -1) * hs ** -0.5
        wei = wei.exp() * self.tril[:T, :T]
        wei = wei / wei.sum(dim=-1, keepdim=True)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "CausalSelfAttention"
EXPECT = ("causal-leakage",)
DIAGNOSIS = None
LINE = 33  # the line `mha-check trace` marks (exp-before-mask) and the report points to
