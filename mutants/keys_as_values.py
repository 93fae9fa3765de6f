"""Mixes the keys instead of the values: the attention weights are applied to `k` (`w @ k`), so the value projection
`self.v` is computed, or not, but never reaches the output."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="keys-as-values",
    task="The outputs differ from the lesson's layer, and one of the four projections never receives a gradient.",
    topic="the projections",
    title="The attention weights applied to the keys (weights @ k), not to the values",
    lesson=("Attention scores queries against keys, then mixes the values: each output is a weighted average of "
            "the value vectors, softmax(q kᵀ / √dh) @ v. The keys decide the weights; they are not what is mixed."),
    killed_by=("reference-match", "gradient-match"),
    symptom=("Each output is a weighted average of the keys, so the value projection is never used (its weights get "
             "no gradient) and the outputs differ from the reference."),
    remedy="Multiply the attention weights by the values (weights @ v), not by the keys.",
    rewrite="values",
    fix="ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads",
    variant={"values": "k"},
    trace=("values-from-keys",),
    example=(
        "q, k, v = split(W_q(x)), split(W_k(x)), split(W_v(x)): each (2, 2, 3, 4)\n"
        "w = softmax(mask(q @ kᵀ / 2)): (2, 2, 3, 3), rows summing to 1\n"
        "ctx = w @ k: each output a weighted average of the KEYS (right: w @ v, of the values)\n"
        "v is computed and never used: W_v (8 × 8) gets no gradient (None, i.e. zero) and never learns"
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
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))  # noqa: F841 - v computed, never mixed
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ k).transpose(1, 2).contiguous().view(B, n, d)  # BUG: the keys mixed, not the values
        return self.out(ctx)
