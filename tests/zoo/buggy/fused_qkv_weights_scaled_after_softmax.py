"""Buggy (a student's trial, trials/20 f09): the attention weights are multiplied by the scale after the softmax,
`sim.softmax(dim=-1) * self.scale`, and the scores never scaled: the softmax is as peaked as unscaled scores make it
and each row of weights sums to 1/sqrt(dh).  One fused projection `to_qkv` chunked into q, k, v: no parameter names
the roles, so only this mistake's numbers prove the reading (the trial got cannot tell, nothing wrong)."""
import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads=8, max_seq_len=256, dropout=0.0):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.dim_head = dim // heads
        self.scale = self.dim_head ** -0.5
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("causal_mask", torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).triu(1),
                             persistent=False)

    def forward(self, x):
        b, n, d = x.shape
        h = self.heads
        q, k, v = map(lambda t: t.reshape(b, n, h, -1).transpose(1, 2), self.to_qkv(x).chunk(3, dim=-1))
        sim = torch.matmul(q, k.transpose(-1, -2))
        sim = sim.masked_fill(self.causal_mask[:n, :n], float("-inf"))
        attn = sim.softmax(dim=-1) * self.scale
        attn = self.dropout(attn)
        out = torch.matmul(attn, v)
        out = out.transpose(1, 2).reshape(b, n, d)
        return self.to_out(out)


TARGET = "CausalSelfAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-after-softmax"
