"""Correct, with a number of heads under a name mha-check cannot read: `n_h=4`, left at its default.

Style: a student's layer with the lesson's separate Wq/Wk/Wv/Wo and a divisibility guard of its own.  Built for
d=6 with n_h left at 4, the (correct) guard raises: that is mha-check's input, not the student's mistake.  Rebuilt
with n_h = the number of heads it builds, which is the evidence; `--arg n_h=@heads` makes it pass.
"""
import torch
import torch.nn as nn

TARGET = "MHA"
CANNOT_TELL = ("construct",)
SAYS = ("n_h left at its default 4", "--arg n_h=@heads")
ARG = {"n_h": "@heads"}


class MHA(nn.Module):
    def __init__(self, d_model, max_len, n_h=4):
        super().__init__()
        if d_model % n_h:
            raise ValueError(f"d_model={d_model} is not divisible by n_h={n_h}")
        self.n_h, self.d_h = n_h, d_model // n_h
        self.Wq = nn.Linear(d_model, d_model)
        self.Wk = nn.Linear(d_model, d_model)
        self.Wv = nn.Linear(d_model, d_model)
        self.Wo = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), diagonal=1))

    def forward(self, x):
        B, T, D = x.shape
        q = self.Wq(x).view(B, T, self.n_h, self.d_h).transpose(1, 2)
        k = self.Wk(x).view(B, T, self.n_h, self.d_h).transpose(1, 2)
        v = self.Wv(x).view(B, T, self.n_h, self.d_h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / self.d_h ** 0.5
        att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(dim=-1)
        return self.Wo((att @ v).transpose(1, 2).contiguous().view(B, T, D))
