"""Rotary frequencies computed from the model width d_out instead of the head width."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="rope-model-width-freqs",
    task=("A layer with rotary position embedding: nothing leaks and with one head it equals the reference, but "
          "with several heads the outputs differ from the reference's."),
    topic="the scores",
    title="Rotary frequencies from the model width: theta^(-2i/d_out) instead of theta^(-2i/dh)",
    lesson=("RoPE works per head: pair i of a head turns by position·theta^(-2i/dh), dh the head width, so every head "
            "sees the same spectrum from fast (i = 0) to slow"),
    killed_by=("reference-match", "gradient-match"),
    symptom=("The slower pairs turn too fast (the exponent is divided by d_out instead of dh), so relative positions "
             "are encoded with the wrong wavelengths; with one head (dh = d_out) nothing shows."),
    remedy="Compute the rotary frequencies from the head width, not the model width.",
    fix="inv_freq = theta ** (-torch.arange(0, self.dh, 2) / self.dh)  # (dh/2,) frequencies from the head width",
    rewrite="rope-width",
    variant={"rope": "interleaved", "rope_freqs": "model"},
    trace=("frequencies-from-model-width",),
    example=(
        "d_out = 8, H = 2, dh = 4, theta = 10000: pair i turns by position·theta^(-2i/dh)\n"
        "right: frequencies [10000^0, 10000^(-2/4)] = [1, 0.01]\n"
        "wrong: [10000^0, 10000^(-2/8)] = [1, 0.1]: the second pair turns ten times too fast\n"
        "at position 4 it is turned by 0.4 rad instead of 0.04"
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
        inv_freq = theta ** (-torch.arange(0, self.dh, 2) / d_out)  # BUG: frequencies from the model width
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
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        pos = torch.arange(n, device=x.device)
        q, k = self.rotate(q, pos), self.rotate(k, pos)  # rotary: queries and keys only, per head
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

