"""Gives every head its own full-width (d_out) projections instead of dividing d_out among the heads."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="full-width-heads",
    task="The parameter count grows with the number of heads; in the lesson it does not depend on H at all.",
    topic="splitting into heads",
    title="H full-width heads (each d_out wide) concatenated and projected from H * d_out back to d_out",
    lesson=('Common misconception: "More heads means more parameters." "Splitting rather than multiplying": with '
            "d_h = d_out / H the count is the same for any number of heads."),
    killed_by=("head-invariance", "param-count"),
    trace=("heads-full-width",),
    symptom=("The layer has roughly H times the parameters of the lesson's layer, the count grows with the number "
             "of heads, and the output is a different function."),
    remedy=("Give each head width d_out // heads: project once to d_out for the queries, keys and values and "
            "split that into the heads, and divide the scores by the square root of that head width (a full-width "
            "head's scale, sqrt(d_out), is then the scale-by-sqrt-d mistake)."),
    fix=("self.h, self.dh = nheads, d_out // nheads; one nn.Linear(d, d_out) each for q, k, v (split into heads "
         "by view); self.out = nn.Linear(d_out, d_out)"),
    example=(
        "d = 8, H = 2; right: one W_q, W_k, W_v (8 -> 8) each, split into 2 heads of dh = 4: 264 parameters\n"
        "wrong: each head has its own 8 -> 8 W_q, W_k, W_v: q = stack of 2 × (2, 3, 8) -> (2, 2, 3, 8), dh = 8\n"
        "  merged context (2, 3, 16), out = Linear(16, 8); scores divided by sqrt(8), not sqrt(4)\n"
        "  parameters: 2·3·64 + 16·8 + 8 = 520 for H = 2, 1032 for H = 4, and 264 only for H = 1"
    ),
)


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d if d_out is None else d_out
        if d_out % nheads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by nheads={nheads}")
        self.h, self.dh = nheads, d_out  # BUG: every head is d_out wide instead of d_out // nheads
        head = lambda: nn.Linear(d, d_out, bias=qkv_bias)
        self.q, self.k, self.v = (nn.ModuleList(head() for _ in range(nheads)) for _ in range(3))  # BUG: H Linears each
        self.out = nn.Linear(nheads * d_out, d_out)  # BUG: H * d_out inputs
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, _ = x.shape
        d = self.h * self.dh
        split = lambda heads: torch.stack([f(x) for f in heads], 1)  # BUG: (B, H, n, d_out)
        q, k, v = split(self.q), split(self.k), split(self.v)
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
