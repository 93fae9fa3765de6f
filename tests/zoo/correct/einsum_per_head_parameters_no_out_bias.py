"""Correct math, one lesson rule broken (out-proj-bias): everything by einsum, the projections raw Parameters shaped
per head, Wq/Wk/Wv (d_model, H, dk) and Wo (H, dk, d_model), read by mha-check as the sums over their heads; no
output bias (a student's trial: the report said "Wo[0].T + Wo[1].T has no bias", which read as no projection).

Style: einsum "bnd,dhe->bhne" for the projections, "bhqe,bhke->bhqk" for the scores, a bool `causal` buffer,
`.softmax(dim=-1)`.
"""
import torch
import torch.nn as nn


class EinsumAttention(nn.Module):
    """Everything with einsum: projections, scores, context, output."""

    def __init__(self, d_model, n_heads, max_len=64):
        super().__init__()
        assert d_model % n_heads == 0
        self.h = n_heads
        self.dk = d_model // n_heads
        self.Wq = nn.Parameter(torch.randn(d_model, n_heads, self.dk) * d_model ** -0.5)
        self.Wk = nn.Parameter(torch.randn(d_model, n_heads, self.dk) * d_model ** -0.5)
        self.Wv = nn.Parameter(torch.randn(d_model, n_heads, self.dk) * d_model ** -0.5)
        self.Wo = nn.Parameter(torch.randn(n_heads, self.dk, d_model) * d_model ** -0.5)
        self.register_buffer("causal", torch.ones(max_len, max_len).tril().bool())

    def forward(self, x):
        n = x.shape[1]
        q = torch.einsum("bnd,dhe->bhne", x, self.Wq)
        k = torch.einsum("bnd,dhe->bhne", x, self.Wk)
        v = torch.einsum("bnd,dhe->bhne", x, self.Wv)
        s = torch.einsum("bhqe,bhke->bhqk", q, k) / self.dk ** 0.5
        s = s.masked_fill(~self.causal[:n, :n], float("-inf"))
        p = s.softmax(dim=-1)
        ctx = torch.einsum("bhqk,bhke->bhqe", p, v)
        return torch.einsum("bhne,hed->bnd", ctx, self.Wo)


TARGET = "EinsumAttention"
EXPECT = ()
RULES_BROKEN = ("out-proj-bias",)
RULE_MISTAKE = "out-proj-no-bias"
