"""Adds -1e9 to the masked scores instead of filling them with -inf: holds at every realistic magnitude, breaks at
huge ones and in half precision (the annotated transformer's convention, written additively)."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="additive-mask-1e9",
    task=("The layer gives the lesson's outputs and gradients, yet a future token of enormous size changes an "
          "earlier output."),
    topic="the causal mask",
    title="A finite additive mask (scores + -1e9 on the future) instead of a -inf fill",
    lesson=("Masked positions must get weight exactly 0 after the softmax (lesson LM3-T4, causal masking); only -inf "
            "guarantees it whatever the scores. A finite mask added to the scores holds only while every real score "
            "stays far below its size, and -1e9 does not fit in half precision at all."),
    killed_by=("mask-fill",),
    symptom=("At every magnitude a trained model reaches, the future gets weight exactly 0 in float64, so outputs and "
             "gradients equal the reference's; a future token whose score exceeds 1e9 still outweighs the mask, and "
             "in float16 -1e9 overflows to -inf, so the same code behaves differently by dtype."),
    rewrite="additive",
    trace=("additive-finite-mask",),
    remedy="Hide the future with -inf, not -1e9: masked_fill the scores with float(\"-inf\") where the mask is set.",
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))',
    example=(
        "scores: (2, 2, 3, 3); row 0 = [s00, s01 - 1e9, s02 - 1e9] before the softmax\n"
        "with ordinary tokens |s| < 100: e^(-1e9) is exactly 0 in float64, the same as -inf\n"
        "tokens 1, 2 of size 1e30: s01 ≈ 1e30, and 1e30 - 1e9 = 1e30 wins the softmax: y[:, 0] changes\n"
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
        scores = scores + torch.where(self.mask[:n, :n], -1e9, 0.0)  # BUG: a finite mask added, not a -inf fill
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
