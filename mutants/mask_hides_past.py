"""The mask buffer is torch.tril(ones, diagonal=-1), filled as if it marked the future: it marks the past, so each
token sees itself and every later token (a student's trial, 2026-12-05: "1 where we mask")."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="mask-hides-past",
    task="Each output depends on later tokens, and token 0 reads every token of the sequence.",
    topic="the causal mask",
    title=("Causal mask turned around: it hides the past and keeps the future (torch.tril(..., diagonal=-1) as "
           "the positions to hide, or torch.triu(ones) as those to keep)"),
    lesson=("The mask marks the future: torch.triu(ones, diagonal=1) is 1 above the diagonal, at the positions "
            "masked_fill sets to -inf; torch.tril(ones, diagonal=-1) is 1 below it, at the past."),
    killed_by=("causal-leakage", "reference-match", "gradient-match"),
    variant={"mask": "hides-past"},
    trace=("mask-hides-past",),
    rewrite="past",
    symptom=("Each token attends to itself and to every later token, never to an earlier one: the layer reads the "
             "future it should predict and ignores the past."),
    remedy=("Hide the future, not the past: the positions filled must be the ones after each token, above the "
            "diagonal (torch.triu(ones, diagonal=1) for a mask that marks what to hide, torch.tril(ones) for one "
            "that marks what to keep)."),
    fix='self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())',
    example=(
        "n = 3: torch.triu(ones, diagonal=1) = [[0, 1, 1], [0, 0, 1], [0, 0, 0]]: 1 marks the future\n"
        "wrong: torch.tril(ones, diagonal=-1) = [[0, 0, 0], [1, 0, 0], [1, 1, 0]]: 1 marks the past\n"
        "with all scores 0: row 0 = [1/3, 1/3, 1/3] (token 0 reads tokens 1 and 2), row 2 = [0, 0, 1]\n"
        "right: [1, 0, 0], [0.5, 0.5, 0], [1/3, 1/3, 1/3]"
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
        self.register_buffer("mask", torch.tril(torch.ones(context_length, context_length), -1).bool())  # BUG: past

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
