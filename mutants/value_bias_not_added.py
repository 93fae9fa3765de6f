"""Applies the value projection by its weight alone (`F.linear(x, self.v.weight)`): with qkv_bias=True its bias is
created, counted and saved, but never added to the values.  The attention weights of a row sum to one, so a value
bias is a constant shift of every output (W_o b_v): a key bias left out changes no output at all (softmax ignores
a constant added to a row), which is why only the query and the value biases are catalogued mistakes of the
numbers; parameters-used finds all three."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="value-bias-not-added",
    task=("Built with qkv_bias=True every position's output is off by the same vector from the lesson's layer, and "
          "one parameter never receives a gradient; without the biases everything is right."),
    topic="the projections",
    title="Value projection applied by its weight alone (F.linear(x, W_v.weight)): its bias never added",
    lesson=("A projection is its weight and its bias: nn.Linear(d_in, d_out, bias=qkv_bias) computes x @ W.T + b, "
            "and a bias created but never added is counted, saved and moved, but never trained."),
    killed_by=("parameters-used", "reference-match"),
    symptom=("With qkv_bias=False nothing is wrong; with qkv_bias=True the values lack b_v, so every output is "
             "shifted by -W_o b_v from the reference's, and b_v gets no gradient."),
    remedy=("Apply the value projection whole, weight and bias, as for the queries and the keys: call the Linear on "
            "x, not F.linear (or x @ W.T) with its weight alone."),
    fix="q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))",
    trace=("value-bias-left-out",),
    variant={"bias_left_out": "v"},
    example=(
        "self.v = nn.Linear(8, 8, bias=True); v = F.linear(x, self.v.weight): (2, 3, 8), no b_v in it\n"
        "ctx[t] = sum_s w[t, s] (x_s W_v^T): the weights of a row sum to 1, so each lacks exactly b_v\n"
        "y[t] = W_o ctx[t] + b_o: every position's output off by the same W_o b_v\n"
        "after (y * g).sum().backward(): v.bias.grad is None\n"
        "right: v = self.v(x), that is x_s W_v^T + b_v"
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
        q, k = split(self.q(x)), split(self.k(x))
        v = split(F.linear(x, self.v.weight))  # BUG: the value projection's weight alone: b_v never added
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
