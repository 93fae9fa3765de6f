"""Divides the scores by a fixed number (8.0, the square root of a paper's 64-wide heads) that is not sqrt(dh)."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="scale-other",
    task=("The attention is sharper or flatter than the lesson's by the same factor whatever the layer's widths; "
          "nothing crashes."),
    topic="scaling the scores",
    title="Scores divided by a number no other catalogued scale has (a constant such as 8.0) instead of sqrt(dh)",
    lesson=('Each head runs scaled dot-product attention on vectors of width d_h = d_out / H: "scores = q @ '
            'k.transpose(2, 3) / self.dh ** 0.5"; the divisor follows the head width, it is not a constant copied '
            'from a paper whose heads were 64 wide.'),
    killed_by=("reference-match", "gradient-match"),
    trace=("wrong-scale",),
    symptom=("The scores are divided by the wrong number, so the softmax is too sharp or too flat and the attention "
             "weights and outputs differ from the reference; nothing crashes."),
    remedy=("Divide the scores by the square root of the head width, the last axis of the queries and keys "
            "(math.sqrt(q.size(-1))), not by a number written into the code."),
    rewrite="scale",
    fix="scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)",
    variant={"scale": 8.0},
    fitted=("scale",),  # any divisor no named scale has: 8.0 (a 64-wide head's), a student's 3.0, sqrt(KV·dh)
    named_by_trace=True,  # a learned temperature's value is the layer's design (TimesFM's per-dimension scale)
    example=(
        "d = 8, H = 2, dh = 4: right: scores / sqrt(4) = / 2; wrong: scores / 8, the sqrt of GPT-2's dh = 64\n"
        "  the scores are 4 times too small\n"
        "raw q·k = 4 and 0 with two allowed keys:\n"
        "  right: softmax([2, 0]) = [0.881, 0.119]; wrong: softmax([0.5, 0]) = [0.622, 0.378]\n"
        "only a layer whose heads are 64 wide gets the lesson's numbers with / 8"
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
        scores = q @ k.transpose(2, 3) / 8.0  # BUG: a constant, right only for heads 64 wide
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
