"""The divisibility test is inverted: every valid width is refused, so the layer cannot be built at all."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="divisibility-inverted",
    task="CausalMHA(8, 2, 16) refuses to build, although 8 features split evenly into 2 heads.",
    topic="the constructor and its widths",
    title="The check that nheads divides d_out is written the wrong way round and refuses every valid width",
    lesson='Engineering implications: "Choose d_out divisible by H ... Check this when building the config."',
    killed_by=("construct",),
    trace=("guard-refuses-divisible",),
    rewrite="divisible",
    symptom=("Constructing the layer with d_out=6 and 2 heads raises 'not divisible', while an invalid width "
             "would be accepted: the guard rejects exactly the configurations it should allow."),
    remedy="Raise only when the width is not divisible by the number of heads (a non-zero remainder), not when it is.",
    fix="raise when the remainder is non-zero: `if d_out % nheads != 0: raise ValueError(...)`",
    example=(
        "right: d_out = 8, H = 2: 8 % 2 == 0, so dh = 4 and the layer is built\n"
        "wrong: `if d_out % nheads == 0: raise`: CausalMHA(8, 2, 16) raises 'd_out=8 is not divisible by nheads=2'\n"
        "while CausalMHA(8, 3, 16) is accepted: dh = 8 // 3 = 2, and forward on x (2, 3, 8) fails in the split:\n"
        "  q.view(2, 3, 3, 2) needs 36 values, q has 48: shape '[2, 3, 3, 2]' is invalid for input of size 48"
    ),
)


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d if d_out is None else d_out
        if d_out % nheads == 0:  # BUG: the condition is inverted
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

