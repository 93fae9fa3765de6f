"""Rotary embedding applied over the full width before the head split, with frequencies from d_out."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="rope-before-split",
    task=("A layer with rotary position embedding: nothing leaks, one head is right, but with several heads the "
          "outputs differ from the reference's."),
    topic="the scores",
    title="Rotary embedding applied to the full-width q and k before the head split (one spectrum over d_out)",
    lesson=("RoPE works per head: after the split, pair i of every head turns by position·theta^(-2i/dh); rotating "
            "the (B, n, d_out) projections gives head h the frequencies of pairs h·dh/2 ... of one long spectrum"),
    killed_by=("reference-match", "gradient-match"),
    symptom=("Each head gets a different slice of one spectrum over the full width: the first head's pairs turn "
             "nearly right, the later heads' hardly turn at all, so they lose their sense of position."),
    remedy="Split into heads first, then rotate the queries and keys per head with tables of the head width.",
    fix=("q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))  # then rotate q and k per head, with "
         "tables of the head width"),
    variant={"rope": "interleaved", "rope_where": "before-split"},
    trace=("rotated-before-split",),
    example=(
        "d_out = 8, H = 2, dh = 4, theta = 10000\n"
        "right: every head's pairs turn by position·[1, 0.01]\n"
        "wrong: the full-width spectrum 10000^(-2j/8), j = 0..3, is [1, 0.1, 0.01, 0.001]:\n"
        "  head 0 gets [1, 0.1], head 1 gets [0.01, 0.001]: head 1 barely knows where its tokens are"
    ),
)


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False, theta=10000.0):
        super().__init__()
        d_out = d if d_out is None else d_out
        if d_out % nheads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by nheads={nheads}")
        self.h, self.dh = nheads, d_out // nheads
        self.q, self.k, self.v = (nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3))
        self.out = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())
        inv_freq = theta ** (-torch.arange(0, d_out, 2) / d_out)  # BUG: tables for the full width d_out
        angles = torch.outer(torch.arange(context_length), inv_freq)  # (context_length, dh/2)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def rotate(self, t, pos):  # t: (B, H, n, dh), the pairs (t0, t1), (t2, t3), ... turned by pos * inv_freq
        cos, sin = self.cos[pos], self.sin[pos]  # (n, dh/2)
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

    def forward(self, x):
        B, n, _ = x.shape
        d = self.h * self.dh
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        pos = torch.arange(n, device=x.device)
        q, k, v = split(self.rotate(self.q(x), pos)), split(self.rotate(self.k(x), pos)), split(self.v(x))  # BUG
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

