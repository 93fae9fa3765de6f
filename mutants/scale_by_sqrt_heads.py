"""Divides the scores by sqrt(H), the number of heads, instead of sqrt(dh), the head width."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="scale-by-sqrt-heads",
    task=("The attention is sharper than the lesson's with wide heads and right only where the number of heads "
          "equals the head width; nothing crashes."),
    topic="scaling the scores",
    title="Scores scaled by 1/sqrt(H), the number of heads, instead of 1/sqrt(dh), the head width",
    lesson=('Each head runs scaled dot-product attention on vectors of width d_h = d_out / H: "scores = q @ '
            'k.transpose(2, 3) / self.dh ** 0.5"; the scale is about the width of the vectors dotted, not how many '
            'heads there are.'),
    killed_by=("reference-match", "gradient-match"),
    trace=("scaled-by-sqrt-heads",),
    symptom=("The scores are sqrt(dh / H) times too large (too small where heads outnumber their width), so the "
             "attention weights and the outputs differ from the reference; with one head they are not scaled at "
             "all; nothing crashes."),
    remedy="Divide the scores by the square root of the head width (width // heads), not of the number of heads.",
    rewrite="scale",
    fix="scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)",
    variant={"scale": "sqrt-h"},
    example=(
        "d = 8, H = 2, dh = 4: right: scores / sqrt(4) = / 2; wrong: scores / sqrt(2) = / 1.41\n"
        "  the scores are sqrt(dh / H) = 1.41 times too large\n"
        "raw q·k = 4 and 0 with two allowed keys:\n"
        "  right: softmax([2, 0]) = [0.881, 0.119]; wrong: softmax([2.83, 0]) = [0.944, 0.056]\n"
        "with H = 1 the scores are not scaled at all; GPT-2 (dh = 64, H = 12): / 3.46 instead of / 8"
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
        scores = q @ k.transpose(2, 3) / self.h ** 0.5  # BUG: sqrt of the number of heads, not of dh
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
