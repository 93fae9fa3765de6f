"""Leaves out the 1/sqrt(dh) scaling of the attention scores."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="no-scaling",
    task="The attention weights are too peaked and the outputs differ from the lesson's layer; nothing crashes.",
    topic="scaling the scores",
    title="Attention scores not divided by sqrt(dh)",
    lesson=('Each head runs "scaled dot-product attention"; worked example: "Scores: q @ k.transpose(2, 3) ... '
            'Scale, mask, softmax over the last axis."'),
    killed_by=("reference-match", "gradient-match"),
    trace=("scores-not-scaled",),
    symptom=("The softmax is too peaked (scores are sqrt(dh) times too large, worse for wider heads), so the "
             "attention weights and outputs differ from the reference and saturate in training."),
    remedy="Divide the scores by the square root of the head width (the queries' last axis) before the softmax.",
    rewrite="scale",
    fix="scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)",
    variant={"scale": "none"},
    example=(
        "d = 8, H = 2, dh = 4: right: scores = q·k / sqrt(4) = q·k / 2\n"
        "say a query has raw q·k = 4 and 0 with its two allowed keys:\n"
        "  right: softmax([4/2, 0]) = softmax([2, 0]) = [0.881, 0.119]\n"
        "  wrong: softmax([4, 0]) = [0.982, 0.018]: scores twice too large, a much peakier softmax\n"
        "wider heads make it worse: with dh = 64 (GPT-2) the scores are 8 times too large"
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
        scores = q @ k.transpose(2, 3)  # BUG: no / self.dh ** 0.5
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
