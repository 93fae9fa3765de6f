"""Scales the attention weights by 1/sqrt(dh) after the softmax instead of the scores before it."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="scale-after-softmax",
    task=("The attention is as peaked as unscaled scores would make it, and every output is smaller than the "
          "lesson's layer's; nothing crashes."),
    topic="scaling the scores",
    title="The attention weights multiplied by 1/sqrt(dh) after the softmax, the scores never scaled",
    lesson=('Scaled dot-product attention scales the scores, then masks them and takes the softmax: "Scale, mask, '
            'softmax over the last axis."  The scale divides what goes into the softmax, so that wider heads do not '
            'make it saturate; applied to what comes out, it only shrinks each row of weights.'),
    killed_by=("reference-match", "gradient-match"),
    trace=("scaled-after-softmax",),
    symptom=("The softmax sees unscaled scores, so it is too peaked (worse for wider heads), and its weights are "
             "then multiplied by 1/sqrt(dh), so each row sums to 1/sqrt(dh) instead of 1: every output is the "
             "wrong average, shrunk."),
    remedy=("Divide the scores by the square root of the head width (the queries' last axis) before the softmax, "
            "and take the scaling off the attention weights after it."),
    fix="scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)",
    variant={"scaled": "weights"},
    example=(
        "d = 8, H = 2, dh = 4: say a query has raw q·k = 4 and 0 with its two allowed keys\n"
        "  right: softmax([4/2, 0]) = softmax([2, 0]) = [0.881, 0.119], summing to 1\n"
        "  wrong: softmax([4, 0]) / 2 = [0.982, 0.018] / 2 = [0.491, 0.009], summing to 0.5\n"
        "the output is half of a peakier average of the values"
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
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1) / self.dh ** 0.5  # BUG: the weights scaled, not the scores
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
