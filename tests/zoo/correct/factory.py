"""Correct: a factory function `make_attention(d_model, n_heads, context_length)` returning a module.

Style: lucidrains-like building block. The class takes (dim, heads, dim_head, max_seq_len) and has to_q / to_k /
to_v (no bias) and to_out; the causal mask is built on the fly with `triu(j - i + 1)` on x.device and filled with
-finfo.max. The factory derives dim_head from d_model and does the divisibility check (the class on its own would
accept any dim_head). The tool must call the function, not a class (TARGET is the function).
"""
import torch
from torch import nn


class _CausalAttention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=64, max_seq_len=2048, dropout=0.0):
        super().__init__()
        inner_dim = dim_head * heads
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.max_seq_len = max_seq_len

        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_k = nn.Linear(dim, inner_dim, bias=False)
        self.to_v = nn.Linear(dim, inner_dim, bias=False)
        self.attn_dropout = nn.Dropout(dropout)
        self.to_out = nn.Linear(inner_dim, dim)

    def forward(self, x):
        b, n, _ = x.shape
        h = self.heads
        assert n <= self.max_seq_len, "sequence is longer than max_seq_len"

        q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
        q, k, v = map(lambda t: t.reshape(b, n, h, -1).transpose(1, 2), (q, k, v))

        q = q * self.scale
        sim = torch.einsum("bhid,bhjd->bhij", q, k)

        i, j = sim.shape[-2:]
        causal_mask = torch.ones((i, j), device=x.device, dtype=torch.bool).triu(j - i + 1)
        sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)

        attn = sim.softmax(dim=-1)
        attn = self.attn_dropout(attn)

        out = torch.einsum("bhij,bhjd->bhid", attn, v)
        out = out.transpose(1, 2).reshape(b, n, -1)
        return self.to_out(out)


def make_attention(d_model, n_heads, context_length, dropout=0.0):
    if d_model % n_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    return _CausalAttention(
        dim=d_model,
        heads=n_heads,
        dim_head=d_model // n_heads,
        max_seq_len=context_length,
        dropout=dropout,
    )


TARGET = "make_attention"
EXPECT = ()
