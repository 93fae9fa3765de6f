"""Computes the attention weights under `torch.no_grad()`, cutting the scores out of the backward pass."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="weights-under-no-grad",
    task="The outputs are exactly right, but W_q and W_k never receive a gradient, so they would never learn.",
    topic="gradients",
    title="Attention weights computed inside torch.no_grad(): forward right, gradients wrong",
    lesson="The layer is trained end to end: W_Q and W_K learn only through the gradient of the softmax weights.",
    killed_by=("gradient-match", "parameters-used"),
    symptom=("The forward output is exactly right, but no gradient flows through the attention weights: W_Q and "
             "W_K get no gradient and never learn, and the input gradient is incomplete."),
    remedy=("Compute the attention weights, and the projections they come from, with autograd on: outside any "
            "torch.no_grad() block and without .detach(), so the gradient reaches the projections."),
    rewrite="detach",
    fix="w = torch.softmax(scores, dim=-1)  (outside any torch.no_grad() block)",
    trace=("weights-without-grad",),
    example=(
        "forward values are exact: y (2, 3, 8) equals the reference\n"
        "with torch.no_grad(): w = softmax(scores) gives w (2, 2, 3, 3) with requires_grad=False\n"
        "backward from y: W_v and W_o (8 × 8) get the right gradients, but W_q.grad and W_k.grad stay None (zero)\n"
        "  and x.grad (2, 3, 8) lacks the part through the scores, so it differs from the reference's\n"
        "right: w = torch.softmax(scores, dim=-1) with autograd on"
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
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        with torch.no_grad():  # BUG: the weights leave the autograd graph
            w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
