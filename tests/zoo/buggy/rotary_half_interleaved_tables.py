"""Buggy (fixes28b item 1): rotary tables built for interleaved pairs (`repeat_interleave(2, dim=-1)`: each
frequency twice in a row) but applied with rotate_half, which pairs x_i with x_i+dh/2: the two features of a pair
turn by different angles, which is no rotation (scores depend on where the tokens sit, not on t - s only). It was
cannot tell ("neither convention ... reproduces its output", with --map as the help, which would not have helped);
the layer's output is now reproduced with its pairs and tables as written, and compared with the rotate-half
reference: reference-match fails, its fix says which layout the tables need, and trace marks the rotation.

Style: Karpathy's `wei` and `tril`, W_q / W_k / W_v and `proj`, `rotate_half`, cos/sin buffers.
"""
import torch
import torch.nn as nn


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class MixedRope(nn.Module):
    def __init__(self, d_model, n_heads, block_size):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads, self.hd = n_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model)
        inv = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        ang = torch.outer(torch.arange(block_size).float(), inv)
        self.register_buffer("cos", ang.cos().repeat_interleave(2, dim=-1))
        self.register_buffer("sin", ang.sin().repeat_interleave(2, dim=-1))
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        q = self.W_q(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        cos, sin = self.cos[:T], self.sin[:T]
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        wei = q @ k.transpose(-2, -1) * self.hd ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = wei.softmax(dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "MixedRope"


TARGET = "MixedRope"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = None  # no catalogued mistake is this one: reference-match fails by its numbers, and the line is told
LINE = 40
MUST_PASS = ("causal-leakage", "output-shape", "kv-cache")
