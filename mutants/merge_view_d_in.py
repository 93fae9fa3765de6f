"""Merges the heads with view(B, n, d_in), the input width, instead of d_out."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="merge-view-d-in",
    task="The layer works when d_in == d_out; with CausalMHA(6, 2, 16, d_out=8) forward raises a shape error.",
    topic="merging the heads",
    title="Heads merged with view(B, n, d_in): the input width where the output width d_out is meant",
    lesson=('The lesson writes `B, n, d = x.shape` and merges with `.view(B, n, d)`: right only while d_in = d_out. '
            '"Let the input be X of shape (n, d_in), the output width d_out."'),
    killed_by=("output-shape",),
    symptom=("Correct as long as d_in = d_out; with d_in != d_out the merge view raises 'shape [B, n, d_in] is "
             "invalid for input of size B·n·d_out'."),
    remedy="Merge the heads into the output width (heads times head width), not the input width.",
    fix="ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh)  # d_out, not d_in",
    trace=("merge-view-to-input-width",),
    rewrite="merge-width",
    example=(
        "d_in = 6, d_out = 8, H = 2, x: (2, 3, 6)\n"
        "w @ v: (2, 2, 3, 4) -> transpose(1, 2) -> (2, 3, 2, 4): 2·3·8 = 48 values\n"
        "view(2, 3, 6) asks for 36 values: RuntimeError: shape '[2, 3, 6]' is invalid for input of size 48\n"
        "right: view(2, 3, 8), the output width H·dh"
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
        B, n, d_in = x.shape
        d = self.h * self.dh  # noqa: F841 - the reference merges to d; this mistake merges to d_in
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d_in)  # BUG: d_in, the input width
        return self.out(ctx)
