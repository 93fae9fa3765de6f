"""Buggy (dropout in eval): the output goes through `torch.nn.functional.dropout(..., 0.1)` with F.dropout's default
training=True, so it stays on after model.eval(); the layer takes no dropout argument and has no nn.Dropout module.

Style: lucidrains-like `to_q` / `to_k` / `to_v` / `to_out`, heads split with reshape(B, T, H, -1).permute(0, 2, 1, 3),
the softmax written by hand (max subtracted, exp, divided by the sum), the mask applied with torch.where on a boolean
`visible` tril buffer. From a student trial (issue 28): trace marked the dropout at its line, but eval-determinism,
finding no dropout the constructor sets, said "there is no dropout to blame", and the report said "no known mistake
matches" with contiguity's fix (call .contiguous()) first among six failing checks.
"""
import torch
import torch.nn as nn


class HandMHA(nn.Module):
    def __init__(self, dim, heads, max_tokens):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.register_buffer("visible", torch.ones(max_tokens, max_tokens, dtype=torch.bool).tril())

    def forward(self, x):
        B, T, D = x.shape
        split = lambda t: t.reshape(B, T, self.heads, -1).permute(0, 2, 1, 3)
        q, k, v = split(self.to_q(x)), split(self.to_k(x)), split(self.to_v(x))
        scores = q @ k.transpose(-1, -2) / (D // self.heads) ** 0.5
        scores = torch.where(self.visible[:T, :T], scores, torch.tensor(float("-inf")))
        scores = scores - scores.amax(dim=-1, keepdim=True)
        e = scores.exp()
        w = e / e.sum(dim=-1, keepdim=True)
        out = (w @ v).permute(0, 2, 1, 3).reshape(B, T, D)
        return torch.nn.functional.dropout(self.to_out(out), 0.1)


TARGET = "HandMHA"
EXPECT = ("eval-determinism",)
DIAGNOSIS = "dropout-in-eval"
LINE = 35
