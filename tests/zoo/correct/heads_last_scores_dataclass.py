"""Correct: the scores kept as (batch, query, key, head), heads on the LAST axis, from an einsum
"bihx,bjhx->bijh"; the softmax is rightly over dim=2 (the keys j), not dim=-1.

Style: a dataclass config (d_model, n_head, block_size, dropout, bias), `to_q` / `to_k` / `to_v` / `to_out`, the
heads split with view(b, t, nh, hs) and never transposed, a keep-mask buffer of shape (T, T, 1) that broadcasts over
the heads.  (A student's trial: `mha-check trace` marked its softmax(dim=2) as softmax-wrong-axis while the report
passed it.)
"""
from dataclasses import dataclass
import math

import torch
from torch import nn


@dataclass
class AttnConfig:
    d_model: int = 64
    n_head: int = 4
    block_size: int = 128
    dropout: float = 0.0
    bias: bool = True


class HeadsLastAttention(nn.Module):
    """Scores kept as (batch, query, key, head): heads on the last axis."""

    def __init__(self, config: AttnConfig):
        super().__init__()
        assert config.d_model % config.n_head == 0
        self.cfg = config
        self.to_q = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.to_k = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.to_v = nn.Linear(config.d_model, config.d_model, bias=config.bias)
        self.to_out = nn.Linear(config.d_model, config.d_model)
        self.dropout = nn.Dropout(config.dropout)
        allowed = torch.tril(torch.ones(config.block_size, config.block_size)).bool()
        self.register_buffer("allowed", allowed[:, :, None])  # (T, T, 1): broadcast over heads

    def forward(self, x):
        b, t, c = x.shape
        nh, hs = self.cfg.n_head, c // self.cfg.n_head
        q = self.to_q(x).view(b, t, nh, hs)
        k = self.to_k(x).view(b, t, nh, hs)
        v = self.to_v(x).view(b, t, nh, hs)
        s = torch.einsum("bihx,bjhx->bijh", q, k) / math.sqrt(hs)
        s = s.masked_fill(~self.allowed[:t, :t], float("-inf"))
        a = self.dropout(torch.softmax(s, dim=2))  # normalise over the keys j
        y = torch.einsum("bijh,bjhx->bihx", a, v).reshape(b, t, c)
        return self.to_out(y)


TARGET = "HeadsLastAttention"
EXPECT = ()
