"""Splits the keys and the values with `view(B, H, n, dh)` straight from (B, n, d); the queries the lesson's way."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="split-view-order-keys-values",
    task=("Every shape is right, but the outputs differ from the lesson's layer and early outputs depend on "
          "later tokens."),
    topic="splitting into heads",
    rewrite="split-pair",
    title=("The keys and values split with view(B, H, n, dh) straight from (B, n, d); the queries split right"),
    lesson=('Engineering implications: "Splitting with view(B, n, H, d_h) is correct; view(B, H, n, d_h) on the '
            'same tensor silently mixes tokens and features." Worked example: W_q(x), W_k(x), W_v(x) are each '
            'split with view(2, 3, 2, 4) and then transpose(1, 2): all three, not the queries alone.'),
    killed_by=("view-order", "causal-leakage", "reference-match", "gradient-match"),
    trace=("keys-and-values-split-without-transpose",),
    symptom=("Nothing crashes and every shape is right, and the queries are split as in the lesson, but each head's "
             "key and value 'positions' are slices cut across several tokens: the weights and the values they mix "
             "are wrong, and early tokens weigh and receive features of later ones (a causal leak)."),
    remedy=("Split the keys and values like the queries: view as (batch, tokens, heads, head width), then "
            "transpose(1, 2)."),
    fix=("k = k.view(B, n, H, dh).transpose(1, 2); v = v.view(B, n, H, dh).transpose(1, 2)  # like the queries"),
    variant={"split": "view-bhnd:kv"},
    example=(
        "q = W_q(x) is split right: (2, 2, 3, 4), head h = features 4h to 4h+3 of tokens 0, 1, 2\n"
        "wrong: k.view(2, 2, 3, 4) and v.view(2, 2, 3, 4): head 1 'positions' 0, 1, 2 = token 1 f4-7, token 2 f0-3,\n"
        "  token 2 f4-7, in the keys and in the values alike\n"
        "the mask lets output token 0 weigh position 0 only, but in head 1 that key and that value are token 1's\n"
        "  features 4-7: the future leaks into the past through the weights and through the values"
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
        q = self.q(x).view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        k = self.k(x).view(B, self.h, n, self.dh)  # BUG: (B, H, n, dh) straight from (B, n, d)
        v = self.v(x).view(B, self.h, n, self.dh)  # BUG: the same for the values
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
