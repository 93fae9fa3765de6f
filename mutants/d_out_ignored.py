"""Ignores the d_out it is given: every width is d_in."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="d-out-ignored",
    task="The layer works when d_in == d_out, but CausalMHA(8, 2, 16, d_out=6) does not return outputs of width 6.",
    topic="the constructor and its widths",
    title="The constructor ignores d_out and makes every projection d_in wide (d_out = d)",
    lesson='"Let the input be X of shape (n, din), the output width dout, and H heads with dh = dout / H"',
    killed_by=("output-shape",),
    trace=("built-to-input-width",),
    symptom=("With d_in = d_out nobody notices; with d_in != d_out the layer is built with the wrong width: it "
             "refuses valid configurations (the divisibility test runs on d_in) or returns d_in-wide outputs."),
    remedy=("Use the output width the caller gives (d_out, falling back to the input width only when it is None) "
            "for the projections and the head width."),
    fix="d_out = d if d_out is None else d_out  # the output width is its own parameter",
    example=("CausalMHA(5, 2, 7, d_out=6): d_out becomes 5, 5 % 2 != 0 -> ValueError, although 6 % 2 == 0\n"
             "CausalMHA(8, 2, 7, d_out=6): builds a layer of width 8: y has shape (B, n, 8) instead of (B, n, 6)"),
)


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d  # BUG: the d_out argument is ignored
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
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

