"""Buggy: a post-LayerNorm attention block whose temperature is sqrt(d_model) instead of sqrt(d_k).

Stands for a real-code pattern (an early release of a widely used "Attention Is All You Need" reimplementation,
fixed three days later; removed from tests/realzoo/ with the provenance clean-up): the constructor takes the heads
first, (n_head, d_model, d_k, d_v, dropout), with per-head widths d_k and d_v given separately; heads are folded
into the batch head-major; the mask is a (B, n, n) tensor, nonzero on the positions to hide, repeated over the heads;
the residual and a LayerNorm are inside the layer (output = LayerNorm(x + dropout(W_o heads))); and the scaled
dot-product module is built with temperature = d_model ** 0.5.  Written here from that description, in its own
names.

Mistake: scores divided by sqrt(d_model), not by sqrt(d_k).
"""
import numpy as np
import torch
import torch.nn as nn


class TemperedDotProduct(nn.Module):
    def __init__(self, temperature, p=0.1):
        super().__init__()
        self.temperature = temperature
        self.drop = nn.Dropout(p)

    def forward(self, q, k, v, hide=None):
        logits = torch.bmm(q, k.transpose(1, 2)) / self.temperature
        if hide is not None:
            logits = logits.masked_fill(hide, -np.inf)
        w = self.drop(torch.softmax(logits, dim=2))
        return torch.bmm(w, v)


class PostNormMultiHead(nn.Module):
    def __init__(self, n_head, d_model, d_k, d_v, dropout=0.1):
        super().__init__()
        self.n_head, self.d_k, self.d_v = n_head, d_k, d_v
        self.q_lin = nn.Linear(d_model, n_head * d_k)
        self.k_lin = nn.Linear(d_model, n_head * d_k)
        self.v_lin = nn.Linear(d_model, n_head * d_v)
        self.attend = TemperedDotProduct(temperature=np.power(d_model, 0.5))
        self.norm = nn.LayerNorm(d_model)
        self.out_lin = nn.Linear(n_head * d_v, d_model)
        self.drop = nn.Dropout(dropout)

    def _heads_first(self, t, width):
        b, n, _ = t.shape
        return t.view(b, n, self.n_head, width).permute(2, 0, 1, 3).contiguous().view(-1, n, width)

    def forward(self, q, k, v, mask=None):
        b, n, _ = q.shape
        skip = q
        qh = self._heads_first(self.q_lin(q), self.d_k)
        kh = self._heads_first(self.k_lin(k), self.d_k)
        vh = self._heads_first(self.v_lin(v), self.d_v)
        hide = mask.repeat(self.n_head, 1, 1) if mask is not None else None
        out = self.attend(qh, kh, vh, hide=hide)
        out = out.view(self.n_head, b, n, self.d_v).permute(1, 2, 0, 3).contiguous().view(b, n, -1)
        return self.norm(self.drop(self.out_lin(out)) + skip)


TARGET = "PostNormMultiHead"
EXPECT = ("reference-match",)
DIAGNOSIS = "scale-by-sqrt-d"
