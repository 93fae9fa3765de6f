"""Applies the causal mask only in eval mode: training attends to the future."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="train-only-leak",
    task="In eval() mode everything is right; in train() mode early outputs depend on later tokens.",
    topic="the causal mask",
    title="Causal mask applied only in eval() mode: in training every token sees the future",
    lesson=('"Apply dropout to the attention weights during training (and set it to 0 for evaluation)": the mask, '
            "unlike dropout, belongs in both modes."),
    killed_by=("causal-leakage",),
    symptom=("Evaluation and generation look right, but training cheats: in train() mode each token's output "
             "depends on later tokens (like a forgotten is_causal=True in the training branch)."),
    remedy="Apply the causal mask in every mode, in training as in evaluation.",
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))  # in every mode',
    trace=("mask-only-in-eval",),
    example=(
        "if not self.training: scores = scores.masked_fill(...)\n"
        "model.eval(): the gradient map of y[:, 0] is [+, 0, 0] (causal)\n"
        "model.train() (dropout 0): the map is [+, +, +]: y[:, 0] depends on x[:, 1] and x[:, 2]\n"
        "right: mask in both modes; only dropout depends on self.training"
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
        if not self.training:  # BUG: the mask only in eval mode
            scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))  # BUG: skipped in training
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
