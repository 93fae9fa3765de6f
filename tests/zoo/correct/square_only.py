"""A book-style constructor (d_in, d_out, ...) that only accepts d_in == d_out (it asserts it): mha-check checks
it with square widths instead of failing to build it."""
import torch, torch.nn as nn
class Sq(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_in == d_out, "this layer keeps the width"
        assert d_out % num_heads == 0
        self.h, self.dh = num_heads, d_out // num_heads
        self.q, self.k, self.v = (nn.Linear(d_in, d_out, bias=qkv_bias) for _ in range(3))
        self.out = nn.Linear(d_out, d_out)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())
    def forward(self, x):
        B, n, _ = x.shape
        sp = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = sp(self.q(x)), sp(self.k(x)), sp(self.v(x))
        w = self.drop(((q @ k.transpose(2, 3)) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf")).softmax(-1))
        return self.out((w @ v).transpose(1, 2).reshape(B, n, self.h * self.dh))


TARGET = "Sq"
EXPECT = ()
