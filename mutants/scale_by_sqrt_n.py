"""Divides the scores by sqrt(n), the number of tokens (k.size(-2)), instead of sqrt(dh), the head width
(k.size(-1))."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="scale-by-sqrt-n",
    task=("The attention is sharper on short inputs and flatter on long ones than the lesson's, and right only where "
          "the sequence is as long as a head is wide; nothing crashes."),
    topic="scaling the scores",
    title="Scores scaled by 1/sqrt(n), the number of tokens (k.size(-2)), instead of 1/sqrt(dh) (k.size(-1))",
    lesson=('Each head runs scaled dot-product attention on vectors of width d_h = d_out / H: "scores = q @ '
            'k.transpose(2, 3) / self.dh ** 0.5"; the scale is about the width of the vectors dotted, the last axis '
            'of q and k, not how many tokens there are.'),
    killed_by=("reference-match", "gradient-match"),
    trace=("scaled-by-sqrt-n",),
    symptom=("The scores are divided by a number that grows with the input's length: the attention weights and the "
             "outputs differ from the reference wherever n is not dh, and an early token's output changes with the "
             "number of tokens after it, though not with their values; nothing crashes."),
    remedy=("Divide the scores by the square root of the head width, the last axis of the queries and keys "
            "(q.size(-1)), not of the number of tokens (k.size(-2), or the input's x.size(1))."),
    rewrite="scale",
    fix="scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)",
    variant={"scale": "sqrt-n"},
    example=(
        "d = 8, H = 2, dh = 4, n = 3 tokens: right: scores / sqrt(4) = / 2; wrong: scores / sqrt(3) = / 1.73\n"
        "raw q·k = 4 and 0 with two allowed keys:\n"
        "  right: softmax([2, 0]) = [0.881, 0.119]; wrong: softmax([2.31, 0]) = [0.910, 0.090]\n"
        "with n = 1,024 tokens and dh = 64: / 32 instead of / 8, the attention four times too flat"
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
        scores = q @ k.transpose(2, 3) / k.size(-2) ** 0.5  # BUG: sqrt of the number of tokens, not of dh
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
