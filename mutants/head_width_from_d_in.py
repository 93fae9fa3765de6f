"""Derives the head width from the input width d_in instead of the output width d_out."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="head-width-from-d-in",
    task=("The layer works when d_in == d_out; CausalMHA(6, 2, 16, d_out=8) fails in forward or returns the "
          "wrong shape."),
    topic="the constructor and its widths",
    title="Head width computed as d_in // nheads instead of d_out // nheads",
    lesson=('Lesson: "H heads with d_h = d_out / H (we require that H divides d_out)"; the input width d_in only '
            "sizes the Q, K and V projections' inputs."),
    killed_by=("output-shape",),
    trace=("head-width-from-input",),
    rewrite="head-width",
    symptom=("Fine as long as d_in == d_out; with a different output width the split view fails (shape invalid "
             "for input of size ...) or the heads get the wrong width."),
    remedy="Compute the head width from the output width (d_out // heads), not from the input width.",
    fix="self.h, self.dh = nheads, d_out // nheads",
    example=(
        "d_in = 6, d_out = 8, H = 2: x: (2, 3, 6); q = W_q(x): (2, 3, 8)\n"
        "right: dh = d_out // H = 4: q.view(2, 3, 2, 4).transpose(1, 2) -> (2, 2, 3, 4)\n"
        "wrong: dh = d_in // H = 3: q.view(2, 3, 2, 3) needs 36 values but q has 48:\n"
        "  RuntimeError: shape '[2, 3, 2, 3]' is invalid for input of size 48\n"
        "with d_in = d_out = 8 (the lesson's example) both give dh = 4 and the bug stays hidden"
    ),
)


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d if d_out is None else d_out
        if d_out % nheads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by nheads={nheads}")
        self.h, self.dh = nheads, d // nheads  # BUG: d is d_in, the head width comes from d_out
        self.q, self.k, self.v = (nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3))
        self.out = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, _ = x.shape
        d = self.h * self.dh
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
