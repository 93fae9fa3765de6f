"""Returns the concatenated heads without the output projection W_O."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="no-output-projection",
    task="The parameter count is d_out² + d_out below the lesson's formula, and the heads' results never mix.",
    topic="the output projection",
    title="No output projection: the concatenated heads are returned as they are",
    lesson=('Common misconception: "Concatenation alone combines the heads." It puts them side by side; "the '
            'output projection W_O is what lets features from different heads interact."'),
    killed_by=("param-count",),
    trace=("heads-not-projected",),
    symptom=("Features found by different heads never mix and the layer has d_out² + d_out parameters too few: it "
             "computes the lesson's layer with W_o fixed to the identity, which no training can change."),
    remedy=("Add an output projection in __init__, an nn.Linear from the merged heads' width to the same width (the "
            "lesson's d_out to d_out), and apply it to the merged heads."),
    fix="self.out = nn.Linear(d_out, d_out) in __init__, and return self.out(ctx)",
    variant={"out_proj": False},
    rewrite="out-projection",  # an output projection made and never applied: applied on the return line
    example=(
        "ctx after merging: (2, 3, 8) = [head 0: features 0-3 | head 1: features 4-7]\n"
        "right: y = out(ctx) with out = Linear(8, 8): every output feature mixes both heads\n"
        "  parameters 3·8·8 + 8·8 + 8 = 264\n"
        "wrong: y = ctx: the shape (2, 3, 8) is still right, but y[..., 0:4] comes only from head 0\n"
        "  and y[..., 4:8] only from head 1; 192 parameters (the 8·8 + 8 = 72 of out are missing)"
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
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return ctx  # BUG: no output projection self.out
