"""Masks with `~mask`, hiding the past and present instead of the future."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="mask-inverted",
    task="The output of the last token is NaN, and each output depends on later tokens.",
    topic="the causal mask",
    title="Inverted causal mask: ~mask hides the allowed positions and keeps the future",
    lesson=("The mask is True above the diagonal, at the future positions that must be hidden: masked_fill(mask, "
            "-inf), not masked_fill(~mask, -inf)."),
    killed_by=("output-shape", "causal-leakage", "reference-match", "gradient-match"),
    trace=("mask-keeps-future",),
    symptom=("Each token attends only to later tokens, and the last token has nothing left to attend to, so its "
             "output is NaN."),
    rewrite="invert",
    remedy="Hide the future, not the past: fill the scores where the mask marks a later token (above the diagonal).",
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))',
    variant={"mask": "inverted"},
    example=(
        "mask = triu(ones(3, 3), 1) = [[0, 1, 1], [0, 0, 1], [0, 0, 0]] marks the future; ~mask marks past + diagonal\n"
        "wrong: masked_fill(~mask, -inf), with all scores 0:\n"
        "  row 0 = [0, 0.5, 0.5] (token 0 reads only tokens 1 and 2), row 1 = [0, 0, 1]\n"
        "  row 2 = softmax([-inf, -inf, -inf]) = NaN, so y[:, 2] is NaN\n"
        "right: masked_fill(mask, -inf) gives [1, 0, 0], [0.5, 0.5, 0], [1/3, 1/3, 1/3]"
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
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(~self.mask[:n, :n], float("-inf"))  # BUG: ~ inverts the mask
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
