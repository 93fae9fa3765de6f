"""Splits the queries alone with `view(B, H, n, dh)` straight from (B, n, d); the keys and values the lesson's way."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="split-view-order-queries",
    task=("Every shape is right, but the outputs differ from the lesson's layer and early outputs depend on "
          "later tokens."),
    topic="splitting into heads",
    rewrite="split",
    title="The queries alone split with view(B, H, n, dh) straight from (B, n, d); the keys and values split right",
    lesson=('Engineering implications: "Splitting with view(B, n, H, d_h) is correct; view(B, H, n, d_h) on the '
            'same tensor silently mixes tokens and features." Worked example: W_q(x), W_k(x), W_v(x) are each '
            'split with view(2, 3, 2, 4) and then transpose(1, 2): all three, the queries too.'),
    killed_by=("view-order", "causal-leakage", "reference-match", "gradient-match"),
    trace=("queries-split-without-transpose",),
    symptom=("Nothing crashes and every shape is right, and the keys and values are split as in the lesson, but each "
             "head's query 'positions' are slices cut across several tokens: the outputs are wrong, and early tokens "
             "ask with features of later ones (a causal leak)."),
    remedy=("Split the queries like the keys and values: view as (batch, tokens, heads, head width), then "
            "transpose(1, 2)."),
    fix="q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))  # split the queries like the keys and values",
    variant={"split": "view-bhnd:q"},
    example=(
        "q = W_q(x): (2, 3, 8); k and v are split right: (2, 2, 3, 4), head h = features 4h to 4h+3 of tokens 0, 1, 2\n"
        "wrong: q.view(2, 2, 3, 4): head 0 query 'positions' 0, 1, 2 = token 0 f0-3, token 0 f4-7, token 1 f0-3\n"
        "  head 1 query 'positions' 0, 1, 2 = token 1 f4-7, token 2 f0-3, token 2 f4-7\n"
        "scores = q @ k.transpose(2, 3): (2, 2, 3, 3) as it should be, but head 1's row 1 (output token 1) asks\n"
        "  with token 2's features 0-3: the mask lets it weigh keys 0 and 1 only, yet how it weighs them comes from\n"
        "  token 2: the future leaks into the past"
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
        q = self.q(x).view(B, self.h, n, self.dh)  # BUG: the queries alone (B, H, n, dh) straight from (B, n, d)
        k, v = split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
