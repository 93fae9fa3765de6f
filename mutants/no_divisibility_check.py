"""Drops the check that nheads divides d_out, so an indivisible width is silently truncated to nheads * dh."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="no-divisibility-check",
    task="CausalMHA(12, 5, 16) builds without complaint, although 12 features cannot be split into 5 equal heads.",
    topic="the constructor and its widths",
    title="No check at construction that nheads divides d_out",
    lesson=('Engineering implications: "Choose d_out divisible by H ... If the width is not divisible, the '
            'reshape fails. Check this when building the config." Lesson: "we require that H divides d_out".'),
    killed_by=("divisibility",),
    trace=("built-indivisible",),
    symptom=("A config such as d_out=12, nheads=5 is accepted without complaint; then, depending on the code, the "
             "layer silently uses only 5 * 2 = 10 features or fails later in forward, far from the cause."),
    remedy=("Check at the top of __init__ that the width is divisible by the number of heads and raise a "
            "ValueError (or assert) if not."),
    fix=("at the top of __init__: `if d_out % nheads != 0: raise ValueError(...)` (an assert also works), before "
         "the head width d_out // nheads is used"),
    example=(
        "d_out = 8, H = 3 is accepted: dh = 8 // 3 = 2, q, k, v = Linear(8, 6), out = Linear(6, 8)\n"
        "q = W_q(x): (2, 3, 6) -> view(2, 3, 3, 2) -> 3 heads of width 2; y: (2, 3, 8) looks fine\n"
        "  200 parameters instead of an error: only 6 of the 8 configured features are used, and nobody is told\n"
        "right: `if d_out % nheads != 0: raise ValueError(...)`: CausalMHA(8, 3, 16) raises, (8, 2, 16) builds"
    ),
)


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d if d_out is None else d_out
        self.h, self.dh = nheads, d_out // nheads
        self.q, self.k, self.v = (nn.Linear(d, self.h * self.dh, bias=qkv_bias) for _ in range(3))  # BUG: no check
        self.out = nn.Linear(self.h * self.dh, d_out)  # BUG: truncated width, see above
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
