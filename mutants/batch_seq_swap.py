"""Merges the heads with `transpose(0, 2)`, swapping batch and positions, which mixes the sequences of a batch."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="batch-seq-swap",
    task=("With one sequence the outputs look fine; with several, a sequence's output changes when the other "
          "sequences in the batch change."),
    topic="merging the heads",
    title="Merge with transpose(0, 2) instead of transpose(1, 2): batch and sequence axes swapped",
    lesson=('Engineering takeaways: "view as (B, n, H, dh), transpose to (B, H, n, dh), attend, transpose back, '
            'contiguous().view, project": the batch axis must stay first throughout.'),
    killed_by=("batch-independence", "reference-match", "gradient-match"),
    symptom=("Shapes are right and a batch of one works, but with several sequences each output row is assembled "
             "from other sequences and other positions: a sequence's result depends on what else is in the batch."),
    remedy=("Keep the batch axis first: merge the heads back to (batch, tokens, width) with the tokens on axis 1,"
            " never swapping batch and tokens."),
    fix="ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads",
    trace=("merge-moves-batch",),
    variant={"merge": "batch-swap"},
    example=(
        "x: (2, 3, 8) = 2 sequences of 3 tokens; w @ v: (B, H, n, dh) = (2, 2, 3, 4)\n"
        "right: .transpose(1, 2) -> (2, 3, 2, 4), .contiguous().view(2, 3, 8): row [b, t] = seq b, token t, 2 heads\n"
        "wrong: .transpose(0, 2) -> (3, 2, 2, 4) = (n, H, B, dh), then .contiguous().view(2, 3, 8): same shape, but\n"
        "  row [0, 0] = features 0-3: head 0 of seq 0, token 0 | features 4-7: head 0 of seq 1, token 0\n"
        "  output seq 0 is built from tokens 0, 1 of both sequences, output seq 1 from tokens 1, 2 of both\n"
        "with B = 1 the wrong view happens to give the right layout: only a batch of 2 or more shows it"
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
        ctx = (w @ v).transpose(0, 2).contiguous().view(B, n, d)  # BUG: transpose(0, 2)
        return self.out(ctx)
