"""Buggy (student style, unused-projection): separate `wq`/`wk`/`wv` projections with bias, a `wo` output
projection, the heads split with torch.split and stacked, scaled by `self.scale`; a `gate` projection made in
__init__ (left over from a gated variant) that forward never uses."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class LeftoverGateAttention(nn.Module):
    def __init__(self, model_dim, head_count, context):
        super().__init__()
        if model_dim % head_count:
            raise ValueError("model_dim must divide into head_count heads")
        self.head_count, self.head_width = head_count, model_dim // head_count
        self.scale = self.head_width ** -0.5
        self.wq = nn.Linear(model_dim, model_dim, bias=False)
        self.wk = nn.Linear(model_dim, model_dim, bias=False)
        self.wv = nn.Linear(model_dim, model_dim, bias=False)
        self.gate = nn.Linear(model_dim, model_dim)
        self.wo = nn.Linear(model_dim, model_dim)
        self.register_buffer("causal", torch.tril(torch.ones(context, context, dtype=torch.bool)))

    def forward(self, x):
        n = x.shape[1]
        q, k, v = (torch.stack(t.split(self.head_width, dim=-1), dim=1) for t in (self.wq(x), self.wk(x), self.wv(x)))
        scores = (q @ k.transpose(-2, -1)) * self.scale
        weights = F.softmax(scores.masked_fill(~self.causal[:n, :n], float("-inf")), dim=-1)
        return self.wo(torch.cat((weights @ v).unbind(dim=1), dim=-1))


TARGET = "LeftoverGateAttention"
EXPECT = ("param-count", "parameters-used")
DIAGNOSIS = "unused-projection"
LINE = 19
