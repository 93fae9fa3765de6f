"""Fills the masked scores with -100 instead of -inf, a leak too small to see in the outputs."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="finite-fill-100",
    task=("The outputs match the lesson's layer to many digits, yet the gradient of an early output with "
          "respect to a later token is not exactly zero."),
    topic="the causal mask",
    rewrite="fill",
    title=("Masked scores filled with a large finite value (such as -100, or early GPT-2's -1e4) instead of -inf: "
           "a leak invisible in ordinary forward values"),
    lesson=("Masked positions must get weight exactly 0 after the softmax (lesson LM3-T4, causal masking); only -inf "
            "guarantees it."),
    killed_by=("causal-leakage",),
    trace=("fill-leaks-invisibly",),
    symptom=("Future tokens keep a weight of e^fill against a score of 0. With -100 that is about 1e-44: the outputs "
             "agree with the reference to every digit, but the gradient shows that the future still reaches the "
             "past. With -1e4 (early GPT-2 code) it rounds to 0 while the scores are small, and the future gets a "
             "real weight once real scores fall near -1e4 (large activations, half precision). Whatever the finite "
             "value, real scores below it let the future through."),
    remedy=("Fill the masked scores with float(\"-inf\") instead of a finite number, so the future gets a weight of"
            " exactly 0."),
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))',
    variant={"fill": -100.0},
    example=(
        "scores: (2, 2, 3, 3); for a head with all scores 0, row 0 = softmax([0, -100, -100])\n"
        "  = [1.0, 3.7e-44, 3.7e-44]: e^-100 ≈ 3.7e-44 of weight on each future token\n"
        "in float64 1 + 3.7e-44 == 1, so y equals the reference's to every digit (difference exactly 0)\n"
        "but the gradient d y[b, 0] / d x[b, 2] is of order 1e-44, not exactly 0: the future still reaches the past\n"
        "with -1e4 (early GPT-2): softmax([0, -1e4, -1e4]) = [1, 0, 0] (e^-10000 rounds to 0), but with real\n"
        "  scores near -5e4: softmax([-5e4, -1e4, -1e4]) = [0, 0.5, 0.5]: all the weight on the future tokens\n"
        "right: fill -inf gives weight exactly 0 and gradient exactly 0, at every magnitude of the scores"
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
        scores = scores.masked_fill(self.mask[:n, :n], -100.0)  # BUG: finite fill value
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
