"""Correct: a numerically stable softmax written by hand, the row maximum subtracted `.detach()`ed (as lucidrains'
layers do: softmax does not change when a row is shifted, so no gradient is lost), and the attention weights kept
detached on the module for a plot, which the output never uses.  Neither `.detach()` is weights-under-no-grad:
trace marks nothing, every check passes.

Style: `to_q` / `to_k` / `to_v` / `to_out`, `sim`, einsum, a boolean `future` buffer.
"""
import torch
import torch.nn as nn


class StableAttention(nn.Module):
    def __init__(self, dim, heads, max_len):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(dim, dim, bias=False)
        self.to_v = nn.Linear(dim, dim, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.register_buffer("future", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))
        self.last_attn = None

    def forward(self, x):
        b, n, dim = x.shape
        h = self.heads
        q, k, v = (f(x).view(b, n, h, dim // h).transpose(1, 2) for f in (self.to_q, self.to_k, self.to_v))
        sim = torch.einsum("bhid,bhjd->bhij", q, k) * (dim // h) ** -0.5
        sim = sim.masked_fill(self.future[:n, :n], float("-inf"))
        sim = sim - sim.amax(dim=-1, keepdim=True).detach()
        attn = sim.exp()
        attn = attn / attn.sum(dim=-1, keepdim=True)
        self.last_attn = attn.detach()
        out = torch.einsum("bhij,bhjd->bhid", attn, v)
        return self.to_out(out.transpose(1, 2).reshape(b, n, dim))


TARGET = "StableAttention"
EXPECT = ()
