"""Takes the softmax over all positions and only then zeroes the future weights."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="zero-after-softmax",
    task="A token's attention weights do not sum to 1, and early outputs still depend on later tokens.",
    topic="the causal mask",
    title="Mask applied after the softmax (future weights set to 0): rows no longer sum to 1",
    lesson=("Order of operations: scale, mask with -inf, then softmax, so the masked positions get weight exactly "
            "0 and the allowed ones still sum to 1."),
    killed_by=("causal-leakage", "reference-match", "gradient-match"),
    trace=("mask-after-softmax",),
    symptom=("The weights of allowed positions are divided by a sum that includes future tokens: rows don't sum "
             "to 1 and the future still changes the past through the normaliser."),
    rewrite="after-softmax",
    remedy=("Mask the scores with -inf before the softmax instead of zeroing the weights after it, then take the "
            "softmax."),
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf")) before w = torch.softmax(scores, dim=-1)',
    variant={"mask": "after-softmax"},
    example=(
        "with all scores 0, the softmax over all 3 keys gives every row [1/3, 1/3, 1/3]\n"
        "zeroing the future then gives [[1/3, 0, 0], [1/3, 1/3, 0], [1/3, 1/3, 1/3]]: row 0 sums to 1/3, row 1 to 2/3\n"
        "right (mask with -inf, then softmax): [[1, 0, 0], [1/2, 1/2, 0], [1/3, 1/3, 1/3]]\n"
        "w[0, 0] = e^s00 / (e^s00 + e^s01 + e^s02) still contains the future scores s01 and s02,\n"
        "  so y[:, 0] changes when x[:, 1] or x[:, 2] change"
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
        w = torch.softmax(scores, dim=-1)  # BUG: softmax before masking
        w = w.masked_fill(self.mask[:n, :n], 0.0)  # BUG: zeroing after the softmax
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
