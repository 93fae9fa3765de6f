"""Merges the heads with `view(B, n, d)` without first transposing (B, H, n, dh) back to (B, n, H, dh)."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="merge-no-transpose",
    task=("Every shape is right, but the outputs differ from the lesson's layer and early outputs depend on "
          "later tokens."),
    topic="merging the heads",
    rewrite="merge",
    title="Heads merged into (B, n, d) (by view or reshape) straight from (B, H, n, dh), without transpose(1, 2) back",
    lesson=('Worked example: "Merge heads: transpose(1, 2) to (2, 3, 2, 4), then contiguous().view(2, 3, 8) '
            'concatenates the heads."'),
    killed_by=("view-order", "causal-leakage", "reference-match", "gradient-match"),
    trace=("merge-without-transpose",),
    symptom=("The merge reads the (B, H, n, dh) tensor head by head, so each output row is a jumble of several "
             "positions of one head: the outputs are wrong and a token's output contains later tokens."),
    remedy="Move the heads back behind the tokens (transpose(1, 2)) before merging them with view/reshape.",
    fix="ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads",
    variant={"merge": "no-transpose"},
    example=(
        "w @ v: (2, 2, 3, 4) = (B, H, n, dh), stored head by head: per sequence h0t0, h0t1, h0t2, h1t0, h1t1, h1t2\n"
        "  (h = head, t = token, each block 4 features)\n"
        "right: .transpose(1, 2) -> (2, 3, 2, 4), .contiguous().view(2, 3, 8): row t = [h0 of t | h1 of t]\n"
        "wrong: .contiguous().view(2, 3, 8) directly: same shape, rows cut in memory order:\n"
        "  row 0 = [h0t0 | h0t1], row 1 = [h0t2 | h1t0], row 2 = [h1t1 | h1t2]\n"
        "output token 0 carries head 0's result for token 1, which attended to token 1: a causal leak"
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
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).contiguous().view(B, n, d)  # BUG: no transpose(1, 2) back to (B, n, H, dh)
        return self.out(ctx)
