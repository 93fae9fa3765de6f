"""Builds the output projection without its bias, so the layer has d_out parameters too few."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="out-proj-no-bias",
    task="The parameter count is d_out below the lesson's formula 3·d_in·d_out + d_out² + d_out.",
    topic="the output projection",
    title="Output projection built with bias=False",
    lesson=('Engineering implications: "Bias terms ... Count parameters with the setting you actually use"; the '
            "count 3·d_in·d_out + d_out² + d_out includes the output projection's bias."),
    killed_by=("out-proj-bias",),
    symptom=("The layer has d_out parameters fewer than the lesson's formula, which counts the output projection's "
             "bias (param-count still passes: the count is right for the bias setting you chose, as the lesson asks), "
             "and its outputs lack the output bias."),
    remedy="Give the output projection its bias: nn.Linear(d_out, d_out) (bias=True).",
    fix="self.out = nn.Linear(d_out, d_out)",
    trace=("out-proj-without-bias",),
    rewrite="bias",
    example=(
        "d = 8: out = Linear(8, 8, bias=False) has 64 parameters instead of 72: 256 in total instead of 264\n"
        "  (GPT-2 small: 2,362,368 - 768 = 2,361,600)\n"
        "y = ctx @ W_o^T without + b_o: every output row (2·3 = 6 rows of 8) lacks the same vector b_o\n"
        "right: self.out = nn.Linear(d_out, d_out) (bias=True is the default)"
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
        self.out = nn.Linear(d_out, d_out, bias=False)  # BUG: the output bias is missing
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
