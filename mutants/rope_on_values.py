"""Rotary position embedding applied to the values as well as the queries and keys."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="rope-on-values",
    task=("A layer with rotary position embedding: nothing leaks and every shape is right, but the outputs differ "
          "from the reference's with the same weights."),
    topic="the scores",
    title="Rotary embedding applied to the values too (RoPE belongs on the queries and keys only)",
    lesson=("RoPE rotates each query and key by its position so that the score q_t·k_s depends on t - s; the values "
            "carry content, not position, and are never rotated"),
    killed_by=("reference-match", "gradient-match"),
    symptom=("Each value is turned by its own position before the weighted sum, so the output mixes rotated "
             "values: it differs from the reference though the attention weights are right."),
    remedy="Rotate only the queries and keys; leave the values as projected.",
    fix="q, k = self.rotate(q, pos), self.rotate(k, pos)  # rotary: queries and keys only, per head",
    variant={"rope": "interleaved", "rope_values": True},
    trace=("values-rotated",),
    example=(
        "head width 4, token 1 (position 1): its value v = [1, 0, 1, 0]\n"
        "right: v unchanged; the output of token 1 = w0·v0 + w1·[1, 0, 1, 0]\n"
        "wrong: v rotated by 1 rad in its first pair and 0.01 rad in its second: [0.540, 0.841, 1.000, 0.010]\n"
        "so even with the same attention weights the outputs differ from token 1 on (token 0, position 0, is not "
        "turned)"
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
        inv_freq = theta ** (-torch.arange(0, self.dh, 2) / self.dh)  # (dh/2,) frequencies from the head width
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
        q, k, v = self.rotate(q, pos), self.rotate(k, pos), self.rotate(v, pos)  # BUG: the values rotated too
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

