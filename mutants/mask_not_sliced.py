"""Uses the whole (context_length, context_length) mask instead of slicing it to the sequence length n."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="mask-not-sliced",
    task="Inputs of exactly context_length tokens work; any shorter input crashes.",
    topic="the causal mask",
    title=("Full context_length mask used unsliced (or cut on one axis only): works only when n == "
           "context_length"),
    lesson=('Worked code: "scores.masked_fill(self.mask[:n, :n], float("-inf"))": the buffer is built once for '
            "context_length and cut to the current sequence length."),
    killed_by=("output-shape",),
    trace=("mask-size-not-n",),
    symptom=("Sequences of exactly context_length tokens work; any shorter input crashes in masked_fill with a "
             "shape (broadcast) error."),
    remedy=("Cut the context-length mask to the sequence before using it: its first n rows and n columns, n the "
            "number of tokens."),
    rewrite="slice",
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))',
    example=(
        "context_length = 16: self.mask is (16, 16); x: (2, 3, 8) gives scores (2, 2, 3, 3)\n"
        "right: self.mask[:n, :n] -> (3, 3), broadcast over (2, 2, 3, 3)\n"
        "wrong: scores.masked_fill(self.mask, ...) with the (16, 16) mask:\n"
        "  RuntimeError: The size of tensor a (16) must match the size of tensor b (3) at non-singleton dimension 3\n"
        "only an input of exactly 16 tokens, x: (2, 16, 8), runs"
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
        scores = scores.masked_fill(self.mask, float("-inf"))  # BUG: not sliced to [:n, :n]
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
