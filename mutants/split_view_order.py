"""Splits the heads with `view(B, H, n, dh)` straight from (B, n, d), which mixes tokens and features."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="split-view-order",
    task=("Every shape is right, but the outputs differ from the lesson's layer and early outputs depend on "
          "later tokens."),
    topic="splitting into heads",
    rewrite="split-all",
    title="Heads split with view(B, H, n, dh) straight from (B, n, d) instead of view(B, n, H, dh).transpose(1, 2)",
    lesson=('Engineering implications: "Splitting with view(B, n, H, d_h) is correct; view(B, H, n, d_h) on the '
            'same tensor silently mixes tokens and features. The shapes agree, the results are wrong."'),
    killed_by=("view-order", "causal-leakage", "reference-match", "gradient-match"),
    trace=("split-without-transpose",),
    symptom=("Nothing crashes and every shape is right, but each head's 'positions' are slices cut across several "
             "tokens: the outputs are wrong, and early tokens receive features of later ones (a causal leak)."),
    remedy=("Split each projection as (batch, tokens, heads, head width) and then transpose(1, 2), never view "
            "straight to (batch, heads, tokens, head width)."),
    fix="split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)",
    variant={"split": "view-bhnd"},
    example=(
        "q = W_q(x): (2, 3, 8), stored per sequence as token 0 features 0-7, token 1 features 0-7, token 2 ...\n"
        "right: q.view(2, 3, 2, 4).transpose(1, 2) -> (2, 2, 3, 4): head 0 = features 0-3 of tokens 0, 1, 2,\n"
        "  head 1 = features 4-7 of tokens 0, 1, 2\n"
        "wrong: q.view(2, 2, 3, 4) -> (2, 2, 3, 4) too, but head 0 = features 0-7 of token 0 and 0-3 of token 1:\n"
        "  head 0 'positions' 0, 1, 2 = token 0 f0-3, token 0 f4-7, token 1 f0-3\n"
        "  head 1 'positions' 0, 1, 2 = token 1 f4-7, token 2 f0-3, token 2 f4-7\n"
        "output token 0 takes head 1's position 0, which is token 1: the future leaks into the past"
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
        split = lambda t: t.view(B, self.h, n, self.dh)  # BUG: (B, H, n, dh) straight from (B, n, d)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
