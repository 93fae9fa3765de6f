"""Buggy (query for keys): the keys are projected with the queries' weight `self.q_lin.weight`, so the scores are
q·q and the key projection `k_lin` is never used (it gets no gradient).

Style: einsum everywhere, the projections applied through their nn.Linear weights
(`torch.einsum("bnd,ed->bne", x, self.q_lin.weight)`), heads kept on the third axis and never transposed (the einsum
subscripts do the bookkeeping), a boolean tril keep-mask `tri` inverted with `~`. From a student trial (issue 28): the
fix said "Compute the keys with the key projection" in words while the layer's key projection is `k_lin`.
"""
import torch
import torch.nn as nn


class EinsumMHA(nn.Module):
    def __init__(self, d, h, n_ctx):
        super().__init__()
        assert d % h == 0
        self.h = h
        self.q_lin = nn.Linear(d, d, bias=False)
        self.k_lin = nn.Linear(d, d, bias=False)
        self.v_lin = nn.Linear(d, d, bias=False)
        self.o_lin = nn.Linear(d, d)
        self.register_buffer("tri", torch.tril(torch.ones(n_ctx, n_ctx, dtype=torch.bool)))

    def forward(self, x):
        b, n, d = x.shape
        dh = d // self.h
        q = torch.einsum("bnd,ed->bne", x, self.q_lin.weight).view(b, n, self.h, dh)
        k = torch.einsum("bnd,ed->bne", x, self.q_lin.weight).view(b, n, self.h, dh)
        v = torch.einsum("bnd,ed->bne", x, self.v_lin.weight).view(b, n, self.h, dh)
        s = torch.einsum("bihc,bjhc->bhij", q, k) / dh ** 0.5
        s = s.masked_fill(~self.tri[:n, :n], float("-inf"))
        a = s.softmax(-1)
        o = torch.einsum("bhij,bjhc->bihc", a, v).reshape(b, n, d)
        return self.o_lin(o)


TARGET = "EinsumMHA"
EXPECT = ("reference-match", "gradient-match", "parameters-used")
DIAGNOSIS = "query-for-keys"
LINE = 28
