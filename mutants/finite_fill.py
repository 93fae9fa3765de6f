"""Fills the masked scores with -10 instead of -inf, so future tokens keep a small weight."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="finite-fill",
    task="The outputs are slightly off the lesson's layer, and changing a later token moves earlier outputs a little.",
    topic="the causal mask",
    rewrite="fill",
    title="Masked scores filled with a finite value (such as -10.0) instead of -inf",
    lesson=("Masked positions must get weight exactly 0 after the softmax (lesson LM3-T4, causal masking); only -inf "
            "guarantees it."),
    killed_by=("causal-leakage", "reference-match", "gradient-match"),
    trace=("fill-leaks-visibly",),
    symptom=("Future tokens keep a weight of about e^-10 relative to the others: small, but the outputs differ "
             "from the reference and the future influences the past."),
    remedy=("Fill the masked scores with float(\"-inf\") instead of a finite number, so the future gets a weight of"
            " exactly 0."),
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))',
    variant={"fill": -10.0},
    fitted=("fill",),  # any finite fill whose leak shows in the outputs: -1e-12 (hyunwoongko's transformer), 0, -3
    example=(
        "scores: (2, 2, 3, 3); take a head whose scores are all 0 (uniform attention)\n"
        "right, fill -inf: row 0 = softmax([0, -inf, -inf]) = [1, 0, 0] exactly\n"
        "wrong, fill -10: row 0 = softmax([0, -10, -10]) = [0.99991, 4.5e-5, 4.5e-5]: e^-10 ≈ 4.5e-5 per future token\n"
        "  row 1 = softmax([0, 0, -10]) = [0.49999, 0.49999, 2.3e-5]: token 1 still reads token 2\n"
        "with random d = 8 weights y is off the reference by ~1e-4, and d y[b, 0] / d x[b, 2] is ~1e-5, not 0"
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
        scores = scores.masked_fill(self.mask[:n, :n], -10.0)  # BUG: finite fill value
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
