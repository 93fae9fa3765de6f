"""Buggy (full-width-heads): heads as a ModuleList of single-head modules, `OneHead(emb, head_size, block)`, each
built by the layer with head_size = emb, the whole width, instead of emb // heads, and their concatenation
projected from heads * emb back to emb.  The head's own `nn.Linear(emb, head_size)` is right: the line to change is
the layer's, which passes emb as every head's width (a student's trial: the report had pointed at the head's line).

Style: nanoGPT lecture's `OneHead` with `q` / `k` / `v`, `wei`, a 0/1 `tril` buffer, F.softmax; `MultiHead(emb,
heads, block=32)` with `proj`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class OneHead(nn.Module):
    def __init__(self, emb, head_size, block):
        super().__init__()
        self.q = nn.Linear(emb, head_size, bias=False)
        self.k = nn.Linear(emb, head_size, bias=False)
        self.v = nn.Linear(emb, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block, block)))

    def forward(self, x):
        T = x.size(1)
        q, k, v = self.q(x), self.k(x), self.v(x)
        wei = q @ k.transpose(1, 2) * k.size(-1) ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return F.softmax(wei, dim=-1) @ v


class MultiHead(nn.Module):
    def __init__(self, emb, heads, block=32):
        super().__init__()
        self.heads = nn.ModuleList([OneHead(emb, emb, block) for _ in range(heads)])
        self.proj = nn.Linear(emb * heads, emb)

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in self.heads], dim=-1))


TARGET = "MultiHead"
EXPECT = ("param-count", "head-invariance")
DIAGNOSIS = "full-width-heads"
LINE = 33
