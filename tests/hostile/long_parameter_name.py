"""Hostile: no patch, only PyTorch: the query projection's weight is a `ParameterDict` entry whose key is 40,000
characters long (found by red team 15, left open: `mha-check trace` shortened each operation's call with
`re.sub(r"([\\w.\\[\\]]+)\\.weight, \\1\\.bias", ...)`, whose backtracking is quadratic in a name with no `.weight, `
after it, 6.4 s of the trusted parent's CPU for each step naming the weight, and the name fits in any frame).  The
parent shortens a call in time linear in it now.  Wrong (scores never scaled), so it fails whatever its name does."""
import torch
import torch.nn as nn
import torch.nn.functional as F

KEY = "q" * 40_000


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.h, self.dh = num_heads, d_out // num_heads
        self.P = nn.ParameterDict({KEY: nn.Parameter(torch.randn(d_out, d_in) / d_in ** 0.5)})
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        b, n, _ = x.shape
        q = F.linear(x, self.P[KEY]).view(b, n, self.h, self.dh).transpose(1, 2)
        k, v = (w(x).view(b, n, self.h, self.dh).transpose(1, 2) for w in (self.W_key, self.W_value))
        scores = (q @ k.transpose(2, 3)).masked_fill(self.mask[:n, :n], float("-inf"))  # WRONG: never scaled
        ctx = self.dropout(torch.softmax(scores, dim=-1)) @ v
        return self.out_proj(ctx.transpose(1, 2).contiguous().view(b, n, self.h * self.dh))
