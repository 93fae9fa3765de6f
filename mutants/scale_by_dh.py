"""Divides the scores by dh instead of sqrt(dh)."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="scale-by-dh",
    task="The attention weights are too flat and the outputs differ from the lesson's layer; nothing crashes.",
    topic="scaling the scores",
    title="Scores divided by the head width dh instead of its square root",
    lesson='"each head runs scaled dot-product attention": scores = q @ k.transpose(2, 3) / dh ** 0.5',
    killed_by=("reference-match", "gradient-match"),
    trace=("scaled-by-dh",),
    symptom=("The scores are sqrt(dh) times too small, so the attention is flatter than it should be (uniform "
             "for wide heads); outputs and gradients differ from the reference."),
    remedy="Divide the scores by the square root of the head width, not by the head width itself.",
    rewrite="scale",
    fix="scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # the square root of the head width",
    variant={"scale": "dh"},
    example=(
        "dh = 4: right: scores / sqrt(4) = scores / 2; wrong: scores / 4, half as large\n"
        "raw q·k = 4 and 0 with two allowed keys:\n"
        "  right: softmax([2, 0]) = [0.881, 0.119]; wrong: softmax([1, 0]) = [0.731, 0.269]\n"
        "the gap grows with the head width: dh = 64 divides by 64 instead of 8, scores 8 times too small\n"
        "only dh = 1 (sqrt(1) = 1) hides it"
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
        scores = q @ k.transpose(2, 3) / self.dh  # BUG: divided by dh, not sqrt(dh)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

