"""Keys rotated at positions one ahead of the queries': the query and key positions out of step."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="rope-keys-shifted",
    task=("A layer with rotary position embedding: nothing leaks and every shape is right, but the outputs differ "
          "from the reference's with the same weights."),
    topic="the scores",
    title="Query and key positions out of step: keys rotated at positions 1..n, queries at 0..n-1",
    lesson=("RoPE's score q_t·k_s depends on t - s only when the query and the key are turned by their own "
            "positions from one and the same position index"),
    killed_by=("reference-match", "gradient-match"),
    symptom=("Every score sees the distance t - s - 1 instead of t - s: a token looks at itself as if it were its "
             "neighbour, so the attention weights and outputs differ from the reference."),
    remedy="Rotate the queries and the keys with the same positions.",
    fix="q, k = self.rotate(q, pos), self.rotate(k, pos)  # rotary: queries and keys only, per head",
    variant={"rope": "interleaved", "rope_key_shift": 1},
    trace=("keys-rotated-out-of-step",),
    example=(
        "token 2 attends to tokens 0, 1, 2 (distances 2, 1, 0)\n"
        "right: q at position 2, keys at positions 0, 1, 2: the scores see distances 2, 1, 0\n"
        "wrong: keys at positions 1, 2, 3: the scores see distances 1, 0, -1; token 2 sees itself one step in "
        "the future"
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
        angles = torch.outer(torch.arange(context_length + 1), inv_freq)  # BUG: a row more, for the keys below
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
        q, k = self.rotate(q, pos), self.rotate(k, pos + 1)  # BUG: keys one position ahead of the queries
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

