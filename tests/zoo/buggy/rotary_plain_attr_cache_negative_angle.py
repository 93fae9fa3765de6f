"""Buggy: rotary attention whose cos/sin tables are cached in PLAIN attributes, keyed by the sequence length only, so
after module.to(device) the stale tables stay behind; its rotation turns each half-pair by MINUS the angle.

Stands for a real-code pattern (the first rotary version of a speed-run GPT training script, removed from
tests/realzoo/ with the provenance clean-up): a @dataclass config, one fused projection without bias, a small Rotary
module that keeps inv_freq as a buffer but the cos/sin tables (computed in float32) as ordinary attributes rebuilt
only when the sequence length changes, applied to the two halves of each head as
(x1 cos + x2 sin, -x1 sin + x2 cos) - the usual rotation turned the other way, which is still a rotary embedding -
then F.scaled_dot_product_attention(is_causal=True) and an output projection (without bias there; with one
here, so that the plain-attribute cache is this layer's only defect).  Written here from that description, in its
own names.

Mistake: the cached tables are plain attributes, not buffers: module.to() leaves them on the old device (the next
call of the same length mixes devices).  The math is right (the rotation by -angle is a rotary embedding).
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class SpeedrunSettings:
    n_head: int = 6
    n_embd: int = 768


class HalfRotation(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)))
        self.cached_len = None
        self.cos_table = None
        self.sin_table = None

    def forward(self, x):
        n = x.shape[1]
        if n != self.cached_len:
            self.cached_len = n
            t = torch.arange(n, device=x.device).type_as(self.inv_freq)
            angles = torch.outer(t, self.inv_freq)
            self.cos_table = angles.cos()[None, :, None, :]
            self.sin_table = angles.sin()[None, :, None, :]
        return self.cos_table, self.sin_table


def turn(x, cos, sin):
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos + b * sin, -a * sin + b * cos], dim=-1).type_as(x)


class RotarySelfAttention(nn.Module):
    def __init__(self, settings):
        super().__init__()
        self.n_head = settings.n_head
        self.n_embd = settings.n_embd
        self.head_dim = settings.n_embd // settings.n_head
        assert settings.n_embd % settings.n_head == 0
        self.packed = nn.Linear(settings.n_embd, 3 * settings.n_embd, bias=False)
        self.out = nn.Linear(settings.n_embd, settings.n_embd)
        self.rotation = HalfRotation(self.head_dim)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.packed(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, self.head_dim)
        k = k.view(B, T, self.n_head, self.head_dim)
        v = v.view(B, T, self.n_head, self.head_dim)
        cos, sin = self.rotation(q)
        q, k = turn(q, cos, sin), turn(k, cos, sin)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        y = y.transpose(1, 2).contiguous().view_as(x)
        return self.out(y)


TARGET = "RotarySelfAttention"
EXPECT = ("mask-buffer",)
DIAGNOSIS = None  # no catalogued mistake is a rotary table kept in a plain attribute
