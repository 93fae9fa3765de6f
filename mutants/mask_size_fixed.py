"""Builds the mask for 8 positions whatever the context length."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="mask-size-fixed",
    task="Short sequences work, but CausalMHA(8, 2, 16) crashes on a sequence of 10 tokens.",
    topic="the causal mask",
    title="Mask built for a fixed 8 positions instead of context_length: longer sequences fail",
    lesson=("The mask is (context_length, context_length), sliced to (n, n) for a sequence of n tokens: every length "
            "up to the context length must work."),
    killed_by=("output-shape",),
    trace=("mask-made-too-short",),
    symptom=("Short tests pass; any sequence longer than 8 tokens raises 'The size of tensor a (8) must match the "
             "size of tensor b (n)' at masked_fill."),
    remedy="Build the mask for the context length given to the constructor and cut it to the sequence in forward.",
    fix='self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())',
    example=(
        "context_length = 64, n = 64: scores (1, 4, 64, 64), mask (8, 8)[:64, :64] is still (8, 8)\n"
        "masked_fill: The size of tensor a (64) must match the size of tensor b (8) at non-singleton dimension 3\n"
        "with n = 3 it works, so the lesson's worked example never shows it\n"
        "right: torch.ones(context_length, context_length)"
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
        self.register_buffer("mask", torch.triu(torch.ones(8, 8), 1).bool())  # BUG: 8, not context_length

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
        return self.out(ctx)
