"""Fills the masked scores with -1e9 instead of -inf (the annotated transformer's `masked_fill(mask == 0, -1e9)`):
exact at every magnitude a model reaches, but a query whose allowed scores fall below -1e9 gives the future its
weight, and -1e9 does not fit in half precision."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="fill-minus-1e9",
    task=("The layer gives the lesson's outputs and gradients, yet with every allowed score far below zero an early "
          "output follows the later tokens."),
    topic="the causal mask",
    rewrite="fill",
    title="Masked scores filled with -1e9 instead of -inf (masked_fill with a large finite value)",
    lesson=("Masked positions must get weight exactly 0 after the softmax (lesson LM3-T4, causal masking); only -inf "
            "guarantees it whatever the scores. A finite fill replaces the future's scores with a number, and a "
            "query whose allowed scores all fall below that number attends to the future instead."),
    killed_by=("mask-fill",),
    trace=("fill-below-probe",),
    symptom=("At every magnitude a trained model reaches, the future gets weight exactly 0 in float64, so outputs and "
             "gradients equal the reference's; a query whose allowed scores fall below -1e9 gives the future its "
             "weight, and in float16 the same line raises (masked_fill cannot hold -1e9 in half precision: \"value "
             "cannot be converted to type c10::Half without overflow\"), so the same code behaves differently by "
             "dtype."),
    remedy="Fill the masked scores with float(\"-inf\") instead of -1e9, so the future gets a weight of exactly 0.",
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))',
    example=(
        "scores: (2, 2, 3, 3); row 0 = [s00, -1e9, -1e9] after the fill\n"
        "with ordinary tokens |s| < 100: e^(-1e9 - s00) is exactly 0 in float64, the same as -inf\n"
        "W_k = -W_q and tokens 1e6 times larger: s00 = -|q0|^2 is about -1e12, below -1e9, so the future wins\n"
        "  the softmax: the first token's output becomes the mean of the later values\n"
        "right: masked_fill(mask, -inf) gives weight exactly 0 whatever the scores"
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
        scores = scores.masked_fill(self.mask[:n, :n], -1e9)  # BUG: a finite fill, not -inf
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
