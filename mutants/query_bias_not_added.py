"""Applies the query projection by its weight alone (`F.linear(x, self.q.weight)`): with qkv_bias=True its bias is
created, counted and saved, but never added to the queries."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="query-bias-not-added",
    task=("Built with qkv_bias=True the outputs differ from the lesson's layer, and one parameter never receives a "
          "gradient; without the biases everything is right."),
    topic="the projections",
    title="Query projection applied by its weight alone (F.linear(x, W_q.weight)): its bias never added",
    lesson=("A projection is its weight and its bias: nn.Linear(d_in, d_out, bias=qkv_bias) computes x @ W.T + b, "
            "and a bias created but never added is counted, saved and moved, but never trained."),
    killed_by=("parameters-used", "reference-match"),
    symptom=("With qkv_bias=False nothing is wrong; with qkv_bias=True the queries lack b_q, so the scores and the "
             "outputs differ from the reference, and b_q gets no gradient."),
    remedy=("Apply the query projection whole, weight and bias, as for the keys and the values: call the Linear on "
            "x, not F.linear (or x @ W.T) with its weight alone."),
    fix="q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))",
    trace=("query-bias-left-out",),
    variant={"bias_left_out": "q"},
    example=(
        "self.q = nn.Linear(8, 8, bias=True); q = F.linear(x, self.q.weight): (2, 3, 8), no b_q in it\n"
        "scores[t, s] = (x_t W_q^T)·k_s: each lacks b_q·k_s, which differs from key to key, so the softmax changes\n"
        "after (y * g).sum().backward(): q.bias.grad is None\n"
        "right: q = self.q(x), that is x_t W_q^T + b_q"
    ),
)


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d if d_out is None else d_out
        if d_out % nheads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by nheads={nheads}")
        self.h, self.dh = nheads, d_out // nheads
        self.q, self.k, self.v = (nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3))
        self.out = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, _ = x.shape
        d = self.h * self.dh
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q = split(F.linear(x, self.q.weight))  # BUG: the query projection's weight alone: b_q never added
        k, v = split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
