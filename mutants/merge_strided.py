"""Merges the heads with `permute(0, 2, 3, 1).reshape(B, n, d)` after the lesson's split: strided, not in blocks."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="merge-strided",
    task=("Every shape is right and no future token leaks, but the outputs differ from the lesson's layer with the "
          "same weights."),
    topic="merging the heads",
    title=("Heads merged back strided with permute(0, 2, 3, 1).reshape(B, n, d) after the lesson's split: feature j "
           "of head h lands at j·H + h, not where it was split from"),
    lesson=('Engineering implications: "Splitting with view(B, n, H, d_h) is correct"; worked example: "Merge '
            'heads: transpose(1, 2) to (2, 3, 2, 4), then contiguous().view(2, 3, 8) concatenates the heads": the '
            "merge puts every head's features back where the split took them from."),
    killed_by=("view-order", "reference-match", "gradient-match"),
    trace=("merge-strided",),
    symptom=("Nothing crashes, every shape is right and the future stays hidden, but the merge interleaves the heads: "
             "feature j of head h goes to place j·H + h instead of h·dh + j, so the output projection reads every "
             "head's results in other places than the split took them from."),
    remedy=("Move the heads back behind the tokens with transpose(1, 2) and then view/reshape to (batch, tokens, "
            "width): each head's outputs as one block, in head order."),
    fix="ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads",
    variant={"merge": "strided"},
    example=(
        "w @ v: (2, 2, 3, 4) = (B, H, n, dh), H = 2, dh = 4\n"
        "right: .transpose(1, 2).contiguous().view(2, 3, 8): row t = [head 0 f0-3 | head 1 f0-3]\n"
        "wrong: .permute(0, 2, 3, 1).reshape(2, 3, 8): row t = h0f0, h1f0, h0f1, h1f1, h0f2, h1f2, h0f3, h1f3\n"
        "W_o's columns 0-3 meet head 0's f0, head 1's f0, head 0's f1, head 1's f1: not head 0's block"
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
        ctx = (w @ v).permute(0, 2, 3, 1).reshape(B, n, d)  # BUG: merged strided, not in blocks
        return self.out(ctx)


def mha_forward(x, nheads, wq, wk, wv, wo, bq=None, bk=None, bv=None, bo=None):  # pragma: no mutate block - unchecked
    """The reference forward from explicit weights in nn.Linear convention (weight shape (out, in)).

    Used by tests to tie the numpy reference to the torch module; dropout is not part of it (evaluation mode).
    """
    B, n, _ = x.shape
    d_out = wq.shape[0]
    dh = d_out // nheads
    lin = torch.nn.functional.linear
    split = lambda t: t.view(B, n, nheads, dh).transpose(1, 2)
    q, k, v = split(lin(x, wq, bq)), split(lin(x, wk, bk)), split(lin(x, wv, bv))
    scores = q @ k.transpose(2, 3) / dh ** 0.5
    future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), 1)
    w = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d_out)
    return lin(ctx, wo, bo)
