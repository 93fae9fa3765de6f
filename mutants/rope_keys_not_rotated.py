"""Rotary position embedding applied to the queries only: the keys are never rotated."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="rope-keys-not-rotated",
    task=("A layer with rotary position embedding: nothing leaks and every shape is right, but the outputs differ "
          "from the reference's with the same weights."),
    topic="the scores",
    title="Rotary embedding applied to the queries only: the keys are never rotated",
    lesson=("RoPE rotates each query and each key by its own position, so that the score q_t·k_s depends on t - s "
            "alone; a query turned against an unturned key makes the score depend on t, the query's position"),
    killed_by=("reference-match", "gradient-match"),
    symptom=("The scores depend on the query's absolute position instead of the distance between the tokens: the "
             "attention weights differ from the reference's from token 1 on."),
    remedy="Rotate the keys by their positions exactly as the queries are rotated, head by head.",
    fix="q, k = self.rotate(q, pos), self.rotate(k, pos)  # rotary: queries and keys alike, per head",
    variant={"rope": "interleaved", "rope_keys": False},
    trace=("keys-not-rotated",),
    example=(
        "head width 2, theta irrelevant: the pair turns by 1 rad per position; q_1 = k_0 = k_1 = [1, 0]\n"
        "right: q_1 turned by 1, k_0 by 0, k_1 by 1: q_1·k_1 = cos(0) = 1, q_1·k_0 = cos(1) = 0.540\n"
        "wrong: the keys unturned: q_1·k_1 = cos(1) = 0.540 and q_1·k_0 = cos(1) = 0.540, so token 1 no longer "
        "prefers itself\n"
        "the score depends on where the query sits, not on how far apart the two tokens are"
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
        q = self.rotate(q, pos)  # BUG: the keys are not rotated
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

