"""Buggy (student style, rope-on-values): rotary applied to q, k and v."""
import torch
import torch.nn as nn


def rope(t, cos, sin):
    t1, t2 = t[..., 0::2], t[..., 1::2]
    return torch.stack((t1 * cos - t2 * sin, t1 * sin + t2 * cos), dim=-1).flatten(-2)


class RotaryAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len, base=10000.0):
        super().__init__()
        self.n_heads, self.hd = n_heads, d_model // n_heads
        self.Wq, self.Wk = nn.Linear(d_model, d_model, bias=False), nn.Linear(d_model, d_model, bias=False)
        self.Wv, self.Wo = nn.Linear(d_model, d_model, bias=False), nn.Linear(d_model, d_model)
        freqs = base ** (-torch.arange(0, self.hd, 2).float() / self.hd)
        ang = torch.arange(max_len).float()[:, None] * freqs[None, :]
        self.register_buffer("cos", ang.cos())
        self.register_buffer("sin", ang.sin())
        self.register_buffer("causal", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))

    def forward(self, x):
        B, T, D = x.shape
        sp = lambda t: t.view(B, T, self.n_heads, self.hd).transpose(1, 2)
        q, k, v = sp(self.Wq(x)), sp(self.Wk(x)), sp(self.Wv(x))
        cos, sin = self.cos[:T], self.sin[:T]
        q, k, v = rope(q, cos, sin), rope(k, cos, sin), rope(v, cos, sin)
        att = (q @ k.transpose(-2, -1) / self.hd ** 0.5).masked_fill(self.causal[:T, :T], float("-inf"))
        return self.Wo((att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, D))


TARGET = "RotaryAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "rope-on-values"
LINE = 28
