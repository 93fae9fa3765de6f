"""Correct, with optional rotary position embeddings whose tables are built in __init__ whatever the flag: rotary
embeddings rotate pairs of features, so the class rightly refuses an odd head width at construction.

Style: a student's layer with `use_rotary=False` (off, as the lesson's layer has no positions), fused `qkv`,
`out`, SDPA with is_causal=True.  mha-check's required configurations keep head widths even (README); head-invariance
also builds d_out=12 with 4 heads (width 3): refused by design, not a mistake, so it is judged on the even widths.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "RotaryAttention"
CANNOT_TELL = ()
SAYS = ("624 parameters for 1, 2, 3 and 6 heads", "it refuses heads of odd width (H=4, width 3")
ARG = None


class RotaryAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_seq_len, use_rotary=False, base=10000.0):
        super().__init__()
        assert d_model % n_heads == 0, "d_model must be divisible by n_heads"
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        assert self.head_dim % 2 == 0, "rotary embeddings need an even head dimension"
        self.use_rotary = use_rotary
        inv_freq = 1.0 / (base ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        angles = torch.outer(torch.arange(max_seq_len).float(), inv_freq)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def rotate(self, t):
        T = t.shape[-2]
        a, b = t[..., 0::2], t[..., 1::2]
        cos, sin = self.cos[:T].to(t.dtype), self.sin[:T].to(t.dtype)
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))
        if self.use_rotary:
            q, k = self.rotate(q), self.rotate(k)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).contiguous().view(B, T, C))
