"""Correct: a pre-norm layer, attn(scale(x)), whose normalisation is the student's own class with a name that says
nothing of a norm (`Rescaler`: x / rms(x) * gain).

Style: lower-case names (to_q, to_k, to_v, proj), a mask buffer of ones with tril, scores / head_dim ** 0.5,
masked_fill(mask == 0, -inf), heads split with reshape and permute.  Found by a student trial: only classes named
like a norm were probed, so the gain failed param-count (+8) and every weight check could not tell; a module is now
taken for a normalisation by what it does on a probe (each token alone, the same for the token scaled), whatever its
name.
"""
import torch
import torch.nn as nn


class Rescaler(nn.Module):
    def __init__(self, width, eps=1e-6):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.gain


class ScaledInputAttention(nn.Module):
    def __init__(self, width, heads, max_len=64):
        super().__init__()
        if width % heads:
            raise ValueError("width must be divisible by heads")
        self.heads, self.head_dim = heads, width // heads
        self.scale_in = Rescaler(width)
        self.to_q = nn.Linear(width, width, bias=False)
        self.to_k = nn.Linear(width, width, bias=False)
        self.to_v = nn.Linear(width, width, bias=False)
        self.proj = nn.Linear(width, width)
        self.register_buffer("tril", torch.tril(torch.ones(max_len, max_len)))

    def forward(self, x):
        b, t, c = x.shape
        h = self.scale_in(x)
        q, k, v = (f(h).reshape(b, t, self.heads, self.head_dim).permute(0, 2, 1, 3)
                   for f in (self.to_q, self.to_k, self.to_v))
        att = (q @ k.transpose(-2, -1)) / self.head_dim ** 0.5
        att = att.masked_fill(self.tril[:t, :t] == 0, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).permute(0, 2, 1, 3).reshape(b, t, c))


TARGET = "ScaledInputAttention"
EXPECT = ()
