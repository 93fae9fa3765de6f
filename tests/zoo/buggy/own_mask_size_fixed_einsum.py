"""Buggy (student style, mask-size-fixed): the causal mask is built for 8 positions, the length of the lesson's
toy sentence, not for the `max_tokens` the constructor is given; every sequence longer than 8 tokens fails at the
masked_fill.

Style: einsum for the scores and the mix, separate `Wq` / `Wk` / `Wv` / `Wo`, `sim` for the scores, a `future`
buffer, a constructor of `embed, heads, max_tokens`.  The line to change is the one that made the buffer (LINE).
"""
import torch
import torch.nn as nn


class ToyAttention(nn.Module):
    def __init__(self, embed, heads, max_tokens):
        super().__init__()
        assert embed % heads == 0
        self.heads, self.dk = heads, embed // heads
        self.Wq = nn.Linear(embed, embed, bias=False)
        self.Wk = nn.Linear(embed, embed, bias=False)
        self.Wv = nn.Linear(embed, embed, bias=False)
        self.Wo = nn.Linear(embed, embed)
        self.register_buffer("future", torch.triu(torch.ones(8, 8, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        b, t, e = x.shape
        q = self.Wq(x).view(b, t, self.heads, self.dk)
        k = self.Wk(x).view(b, t, self.heads, self.dk)
        v = self.Wv(x).view(b, t, self.heads, self.dk)
        sim = torch.einsum("bihd,bjhd->bhij", q, k) * self.dk ** -0.5
        sim = sim.masked_fill(self.future[:t, :t], float("-inf"))
        attn = sim.softmax(dim=-1)
        out = torch.einsum("bhij,bjhd->bihd", attn, v).reshape(b, t, e)
        return self.Wo(out)


TARGET = "ToyAttention"
EXPECT = ("output-shape",)
DIAGNOSIS = "mask-size-fixed"
LINE = 21  # the buffer made for 8 positions, not the masked_fill (29) that fails on longer sequences
