"""Splits every projection on strided features (`view(B, n, dh, H).permute(0, 3, 1, 2)`), merged the lesson's way."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="split-strided",
    task=("Every shape is right and no future token leaks, but the outputs differ from the lesson's layer with the "
          "same weights."),
    topic="splitting into heads",
    title=("Heads split on strided features with view(B, n, dh, H).permute(0, 3, 1, 2) but merged back the lesson's "
           "way: each head's outputs land on other features than it read"),
    lesson=('Engineering implications: "Splitting with view(B, n, H, d_h) is correct"; worked example: "Merge '
            'heads: transpose(1, 2) to (2, 3, 2, 4), then contiguous().view(2, 3, 8) concatenates the heads": the '
            "merge puts every head's features back where the split took them from."),
    killed_by=("view-order", "reference-match", "gradient-match"),
    trace=("split-strided",),
    symptom=("Nothing crashes, every shape is right and the future stays hidden, but head h takes features h, h + H, "
             "h + 2H, ... of the queries, keys and values while the merge puts its outputs in the block h·dh to "
             "(h + 1)·dh: the output projection reads every head's results in other places than the split took "
             "them from."),
    remedy=("Split each projection as (batch, tokens, heads, head width) and then transpose(1, 2), so that head h "
            "takes the block of features the merge puts its outputs back in."),
    fix="split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)",
    variant={"split": "strided"},
    example=(
        "q = W_q(x): (2, 3, 8), H = 2, dh = 4\n"
        "right: q.view(2, 3, 2, 4).transpose(1, 2): head 0 = features 0-3, head 1 = features 4-7\n"
        "wrong: q.view(2, 3, 4, 2).permute(0, 3, 1, 2): head 0 = features 0, 2, 4, 6, head 1 = features 1, 3, 5, 7\n"
        "merged the lesson's way, head 0's outputs land on features 0-3: W_o reads them where features 0, 2, 4, 6\n"
        "  should be; merged back the same way (permute(0, 2, 3, 1)) the layer would be the lesson's, renumbered"
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
        split = lambda t: t.view(B, n, self.dh, self.h).permute(0, 3, 1, 2)  # BUG: head h takes features h, h + H, ...
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
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
