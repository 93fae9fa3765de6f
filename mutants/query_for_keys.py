"""Computes the keys with the query projection `self.q` instead of `self.k`."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="query-for-keys",
    task="The outputs differ from the lesson's layer, and one of the four projections never receives a gradient.",
    topic="the projections",
    title="Keys computed with the query projection (W_q where W_k belongs)",
    lesson=("Each head has its own projections W_Q, W_K and W_V: queries, keys and values are three different "
            "linear maps of the same input."),
    killed_by=("reference-match", "gradient-match"),
    symptom=("Scores become q·q (symmetric), the key projection is never used (its weights get no gradient), and "
             "the outputs differ from the reference."),
    remedy="Compute the keys with the key projection, not the query projection.",
    rewrite="key-projection",
    fix="q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))",
    variant={"keys": "q"},
    trace=("keys-from-query-weights",),
    example=(
        "q = split(W_q(x)), k = split(W_q(x)): both (2, 2, 3, 4) and equal\n"
        "scores[t, s] = q_t·q_s = scores[s, t]: symmetric before the mask (right: q_t·k_s, which is not)\n"
        "each token's score with itself, q_t·q_t = |q_t|², is never negative\n"
        "W_k (8 × 8) is never used: it gets no gradient (None, i.e. zero) and never learns"
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
        q, k, v = split(self.q(x)), split(self.q(x)), split(self.v(x))  # BUG: keys from self.q
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
