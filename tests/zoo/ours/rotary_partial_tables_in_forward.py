"""Correct, with a partial rotary embedding whose tables are made in forward: the constructor's rope_percentage
(labml's GPT-NeoX layer, HF's partial_rotary_factor) says how many of each head's features are turned, rotate-half
within them, the rest passed through; no cos/sin buffer, no rotary base parameter.  No reference of mha-check's
computes it, so mha-check gives rope_percentage=1.0, checks the rest (it passes) and says so; given 0.5 by --arg
(PARTIAL), what needs a reference is cannot tell and the report must still say the layer is rotary (the
constructor's parameter is the only sign).

Style: one fused qkv Linear chunked in three, the angles made from torch.arange on x.device in forward, a causal mask
made in forward with ones(...).triu(1), output projection with a bias.
"""
import torch
import torch.nn as nn

TARGET = "PartialRotaryTablesInForward"
CANNOT_TELL = ()
PARTIAL = {"rope_percentage": 0.5}  # given by --arg: what needs a reference is cannot tell, and says why
SAYS = ("rope_percentage was given 1.0 (every feature of each head turned",)
ARG = {"rope_percentage": 1.0}


class PartialRotaryTablesInForward(nn.Module):
    def __init__(self, dim, n_heads, max_len, rope_percentage=0.5):
        super().__init__()
        if dim % n_heads:
            raise ValueError("dim must be divisible by n_heads")
        self.n_heads, self.d_k = n_heads, dim // n_heads
        self.turned = int(self.d_k * rope_percentage) // 2 * 2  # an even number of features
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def turn(self, t):
        n, half = t.shape[-2], self.turned // 2
        steps = torch.arange(0, self.turned, 2, device=t.device, dtype=t.dtype) / max(self.turned, 1)
        angles = torch.arange(n, device=t.device, dtype=t.dtype)[:, None] * 10000.0 ** -steps
        cos, sin = angles.cos(), angles.sin()
        a, b, rest = t[..., :half], t[..., half:self.turned], t[..., self.turned:]
        return torch.cat((a * cos - b * sin, b * cos + a * sin, rest), dim=-1)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = (t.view(b, n, self.n_heads, self.d_k).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
        scores = self.turn(q) @ self.turn(k).transpose(-1, -2) / self.d_k ** 0.5
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)
        weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(b, n, d))
