"""Buggy (student style, single-dropout-in-eval): one causal attention head, "Let's build GPT" style, whose weights
go through F.dropout(wei, self.p) without `training=self.training`: F.dropout's default is training=True, so the
head stays random after model.eval().  A student's trial: the single-head layer was named nothing (dropout-in-eval is
a multi-head mistake) and `trace` marked `dropout-always-on`, an id `mha-check explain` did not know.

Style: one head with `key` / `query` / `value` (no output projection), a `tril` buffer, the scores `wei`, a float
`self.p`, the values projected after the softmax.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout=0.1):
        super().__init__()
        self.key = nn.Linear(d_in, d_out, bias=False)
        self.query = nn.Linear(d_in, d_out, bias=False)
        self.value = nn.Linear(d_in, d_out, bias=False)
        self.p = dropout
        self.register_buffer("tril", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)
        q = self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        wei = F.dropout(wei, self.p)
        v = self.value(x)
        return wei @ v


TARGET = "Head"
EXPECT = ("eval-determinism",)
DIAGNOSIS = "single-dropout-in-eval"
LINE = 30
