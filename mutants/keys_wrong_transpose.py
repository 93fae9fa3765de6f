"""Transposes the keys with `transpose(1, 2)` instead of `transpose(2, 3)` when forming the scores."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="keys-wrong-transpose",
    task="forward crashes in the score computation for most sizes (try B=2, n=3, d=8, H=2).",
    topic="the scores",
    title="Scores q @ k.transpose(1, 2) (head and position axes) instead of k.transpose(2, 3)",
    lesson=('Worked example: "Scores: q @ k.transpose(2, 3) has shape (2, 2, 3, 3): one 3 × 3 matrix per head per '
            'sequence."'),
    killed_by=("output-shape",),
    trace=("keys-transposed-wrong",),
    symptom=("forward crashes in the matmul whenever the number of heads, the sequence length and the head width "
             "differ; with lucky equal sizes it runs and computes nonsense."),
    rewrite="keys",
    remedy=("Transpose only the keys' last two axes (transpose(-2, -1)) so the scores are queries (.., n, dh) "
            "times keys (.., dh, n)."),
    fix="scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)",
    example=(
        "q, k: (2, 2, 3, 4) = (B, H, n, dh)\n"
        "right: k.transpose(2, 3) -> (2, 2, 4, 3); q @ it -> scores (2, 2, 3, 3): one 3 × 3 matrix per head\n"
        "wrong: k.transpose(1, 2) -> (2, 3, 2, 4); q @ it: batch axes (2, 2) vs (2, 3) do not broadcast:\n"
        "  RuntimeError: The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 1\n"
        "with H = n = dh (e.g. d = 4, H = 2, n = 2) it runs and mixes heads, positions and features"
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
        scores = q @ k.transpose(1, 2) / self.dh ** 0.5  # BUG: should swap axes 2 and 3
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
