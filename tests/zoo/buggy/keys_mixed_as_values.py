"""Buggy (a student's trial, trials/18 f09): the attention weights multiply the keys, `ctx = probs @ k`, where the
values belong: `v = self.wv(x)...` is computed and never used, so W_v gets no gradient and every output is a weighted
average of the keys.  The scale kept as a buffer, the mask an additive -inf buffer named `bias`, no divisibility guard
and an output projection without bias (two lesson rules beside the mistake)."""
import torch
import torch.nn as nn


class ScaledBufAttention(nn.Module):
    def __init__(self, dim, heads, max_seq_len=512):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.register_buffer("scale", torch.tensor(self.head_dim ** -0.5))
        self.register_buffer("bias", torch.full((max_seq_len, max_seq_len), float("-inf")).triu(1))

    def forward(self, x):
        b, t, c = x.shape
        q = self.wq(x).reshape(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).reshape(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).reshape(b, t, self.heads, self.head_dim).transpose(1, 2)
        logits = (q @ k.transpose(-1, -2)) * self.scale + self.bias[:t, :t]
        probs = logits.softmax(-1)
        ctx = probs @ k
        ctx = ctx.transpose(1, 2).reshape(b, t, c)
        return self.wo(ctx)


TARGET = "ScaledBufAttention"
EXPECT = ("reference-match", "gradient-match", "parameters-used")
DIAGNOSIS = "keys-as-values"
LINE = 28
