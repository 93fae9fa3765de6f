"""Buggy (student style, no catalogued mistake exactly): a fused qkv projection reshaped (B, 3, H, T, hd) and unbound,
where its features are laid out (B, T, 3, H, hd): every "token" of a head mixes features of several tokens, so outputs
depend on later inputs.  The mask itself is right.

From a student's trial: causal-leakage called the leak "the mask is inverted" (as many earlier positions without
influence as an inverted mask leaves), and the student who removed the `~` from a right mask then had that bug too.
An inverted mask is said only where every earlier position has no influence and every later one has.
"""
import torch
import torch.nn as nn


class FusedAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size, dtype=torch.bool)))

    def forward(self, x):
        B, T, C = x.shape
        hd = C // self.n_head
        q, k, v = self.qkv(x).reshape(B, 3, self.n_head, T, hd).unbind(1)
        att = (q @ k.transpose(-2, -1)) / hd ** 0.5
        att = att.masked_fill(~self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


TARGET = "FusedAttention"
EXPECT = ("causal-leakage",)
DIAGNOSIS = None
UNNAMED_OK = True  # the split of the lesson's fused layer in another order than view-order's mutants: no mutant is it
