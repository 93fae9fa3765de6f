"""Normalises the attention scores over the query axis (dim=-2) instead of the key axis."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="softmax-wrong-axis",
    task="A token's attention weights do not sum to 1, and early outputs depend on later tokens.",
    topic="the softmax",
    title="softmax over dim=-2 (queries) instead of dim=-1 (keys)",
    lesson=("Worked example: \"Scale, mask, softmax over the last axis\": each query's weights over the keys sum "
            "to 1."),
    killed_by=("causal-leakage", "reference-match", "gradient-match"),
    trace=("softmax-not-last-axis",),
    symptom=("A token's weights no longer sum to 1, and each weight is normalised with the scores of later "
             "queries, so the future leaks into the past."),
    remedy=("Take the softmax over the last axis (dim=-1), the keys (for an nn.Softmax module, where __init__ builds "
            "it: nn.Softmax(dim=-1))."),
    fix="w = torch.softmax(scores, dim=-1)",
    rewrite="softmax",
    variant={"softmax_axis": -2},
    example=(
        "scores after the mask, all allowed ones 0: [[0, -inf, -inf], [0, 0, -inf], [0, 0, 0]]\n"
        "right, softmax(dim=-1), each row (query) sums to 1: [[1, 0, 0], [1/2, 1/2, 0], [1/3, 1/3, 1/3]]\n"
        "wrong, softmax(dim=-2), each column (key) sums to 1: [[1/3, 0, 0], [1/3, 1/2, 0], [1/3, 1/2, 1]]\n"
        "  row 0 sums to 1/3 and row 2 to 11/6\n"
        "  w[0, 0] = e^s00 / (e^s00 + e^s10 + e^s20) uses the scores of queries 1 and 2,\n"
        "  so y[:, 0] depends on x[:, 1] and x[:, 2]"
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
        w = torch.softmax(scores, dim=-2)  # BUG: normalised over queries, not keys
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
