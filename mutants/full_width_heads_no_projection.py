"""The book's first multi-head wrapper: H full-width heads concatenated, and no output projection."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="full-width-heads-no-projection",
    task="The output is wider than d_out, and the parameter count grows with the number of heads.",
    topic="splitting into heads",
    title="H full-width heads (each d_out wide) concatenated with no output projection: the output is H·d_out wide",
    lesson=('Misconceptions: "More heads means more parameters" and "Concatenation alone combines the heads": the '
            "width is divided among the heads, and W_O mixes them back to d_out."),
    killed_by=("output-shape", "param-count", "head-invariance"),
    trace=("heads-full-width-unprojected",),
    symptom=("Every head projects to the full width d_out and the heads are only stacked side by side: the output "
             "has H·d_out features instead of d_out, and the parameter count grows with H."),
    remedy=("Give each head width d_out // heads: project once to d_out per role, split it into the heads, and "
            "add the output projection."),
    fix=("self.h, self.dh = nheads, d_out // nheads; one Linear(d_in, d_out) per role; "
         "self.out = nn.Linear(d_out, d_out)"),
    example=(
        "d = 8, H = 2: each head's Q, K, V are Linear(8, 8): 2 · 3 · 64 = 384 parameters, no W_O\n"
        "x: (2, 3, 8) -> each head gives (2, 3, 8) -> torch.cat(..., dim=-1) -> y: (2, 3, 16)\n"
        "right: heads of width 8 / 2 = 4 from one Linear(8, 8) per role, merged to (2, 3, 8), then W_O (8 × 8)"
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
        return ctx  # BUG: the H full-width heads side by side, never projected back to d_out
