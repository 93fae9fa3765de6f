"""Buggy (student style, mask-lets-one-future): the "may look" mask is built in __init__ with
torch.tril(..., diagonal=1), one diagonal too many, on a line of its own and stored as a boolean buffer; forward
hides `~keep`, so every token also sees the next one.

Style: `att`, `keep`, `to_q` / `to_k` / `to_v` / `to_out`.  The line to change is the tril in __init__ (LINE), not
the `.bool()` that registers it nor the masked_fill in forward (issue 28, item 6).
"""
import math

import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, heads, max_len):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)
        keep = torch.tril(torch.ones(max_len, max_len), diagonal=1)  # 1 = may look
        self.register_buffer("keep", keep.bool())

    def forward(self, x):
        b, n, dim = x.shape
        q, k, v = (f(x).view(b, n, self.heads, -1).transpose(1, 2) for f in (self.to_q, self.to_k, self.to_v))
        att = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        att = att.masked_fill(~self.keep[:n, :n], float("-inf"))
        att = att.softmax(dim=-1)
        return self.to_out((att @ v).transpose(1, 2).reshape(b, n, dim))


TARGET = "Attention"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-lets-one-future"
LINE = 23  # the tril that builds the mask, not the register_buffer (24) nor the masked_fill (31)
