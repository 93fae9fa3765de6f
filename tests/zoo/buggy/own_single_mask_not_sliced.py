"""Buggy (student style, single-mask-not-sliced): one causal head whose (context_length, context_length) mask is
used whole in masked_fill, not cut to the sequence's T tokens: any input shorter than context_length raises.

Style: one head with `W_q` / `W_k` / `W_v`, scores `att` by einsum, a boolean `future` buffer.
"""
import torch
import torch.nn as nn


class CausalHead(nn.Module):
    def __init__(self, d_in, d_out, context_length):
        super().__init__()
        self.W_q = nn.Linear(d_in, d_out, bias=False)
        self.W_k = nn.Linear(d_in, d_out, bias=False)
        self.W_v = nn.Linear(d_in, d_out, bias=False)
        self.register_buffer("future", torch.ones(context_length, context_length).triu(1).bool())

    def forward(self, x):
        q, k, v = self.W_q(x), self.W_k(x), self.W_v(x)
        att = torch.einsum("btd,bsd->bts", q, k) / q.shape[-1] ** 0.5
        att = att.masked_fill(self.future, float("-inf"))
        att = att.softmax(dim=-1)
        return torch.einsum("bts,bsd->btd", att, v)


TARGET = "CausalHead"
EXPECT = ("output-shape",)
DIAGNOSIS = "single-mask-not-sliced"
LINE = 21
