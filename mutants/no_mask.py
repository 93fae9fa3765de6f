"""Calls the out-of-place `masked_fill` without using its result, so the causal mask is never applied."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="no-mask",
    task="An early token's output changes when a later token changes.",
    topic="the causal mask",
    rewrite="mask",
    title="Causal mask never applied: every position also sees the future",
    lesson=('The causal mask M "the same for all heads" (lesson LM3-T4, causal masking); worked example: "Scale, '
            'mask, softmax over the '
            'last axis."'),
    killed_by=("causal-leakage", "reference-match", "gradient-match"),
    trace=("mask-result-unused", "no-mask-applied", "sdpa-without-causal", "mask-hides-nothing"),
    symptom=("Every token attends to the whole sequence, future included: outputs at a position change when later "
             "tokens change."),
    remedy=("Mask the scores before the softmax: scores = scores.masked_fill(mask[:n, :n], float(\"-inf\")) with a "
            "boolean mask that is True above the diagonal (registered as a buffer in __init__), the result assigned "
            "(masked_fill is not in place); or pass is_causal=True to the fused attention."),
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))',
    variant={"mask": "none"},
    example=(
        "scores: (2, 2, 3, 3); masked_fill returns a new tensor, and `scores.masked_fill(...)` alone throws it away\n"
        "with all scores 0: row 0 = [1/3, 1/3, 1/3] instead of [1, 0, 0]\n"
        "  row 1 = [1/3, 1/3, 1/3] instead of [0.5, 0.5, 0]\n"
        "so y[:, 0] depends on x[:, 1] and x[:, 2]: changing token 2 moves the outputs of tokens 0 and 1\n"
        "right: scores = scores.masked_fill(...) (assign the result)"
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
        scores.masked_fill(self.mask[:n, :n], float("-inf"))  # BUG: result discarded, not in place
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
