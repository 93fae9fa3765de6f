"""Per-head projections in one ModuleList per role named by plural letters (qs, ks, vs), zipped in a Python loop:
a student's trial layer (issue 28), correct.  Before `qs` was read as the queries' name, no reading was tried and
every weight check was cannot-tell."""
import torch
import torch.nn as nn


class ListHeads(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length):
        super().__init__()
        assert d_out % num_heads == 0
        dh = d_out // num_heads
        self.dh = dh
        self.qs = nn.ModuleList([nn.Linear(d_in, dh, bias=False) for _ in range(num_heads)])
        self.ks = nn.ModuleList([nn.Linear(d_in, dh, bias=False) for _ in range(num_heads)])
        self.vs = nn.ModuleList([nn.Linear(d_in, dh, bias=False) for _ in range(num_heads)])
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        n = x.shape[1]
        outs = []
        for wq, wk, wv in zip(self.qs, self.ks, self.vs):
            s = wq(x) @ wk(x).transpose(1, 2) / self.dh ** 0.5
            s = s.masked_fill(self.mask[:n, :n], float("-inf"))
            outs.append(torch.softmax(s, dim=-1) @ wv(x))
        return self.out_proj(torch.cat(outs, dim=-1))


TARGET = "ListHeads"
EXPECT = ()
