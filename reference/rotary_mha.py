"""The lesson's `CausalMHA` with rotary position embedding (RoPE) on the queries and keys of every head (`RotaryMHA`).

Written in the lesson's style, line for line as `reference/causal_mha.py` plus the rotation, because the `rope_*`
mutants in `mutants/` are copies of this class with one deliberate bug each.  The rotation turns the pairs
(x0, x1), (x2, x3), ... of each head ("interleaved", the RoFormer paper, CS336, Meta's llama); `rope_forward`
below also gives the rotate-half convention (x_i, x_{i + dh/2}) of HF transformers and GPT-NeoX, and ties both to
reference/rotary.py in the unit tests.  The class keeps the lesson's name, `CausalMHA`, as its mutants do (the
exercises swap the buggy lines for this class's own).
"""
import torch
import torch.nn as nn


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
        q, k = self.rotate(q, pos), self.rotate(k, pos)  # rotary: queries and keys only, per head
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)


def rope(t, convention, theta=10000.0):  # pragma: no mutate block - unchecked
    """t (B, H, n, dh) rotated in torch, independently of reference/rotary.py: interleaved through complex numbers
    (Meta's llama), half through rotate_half (HF transformers)."""
    n, dh = t.shape[-2], t.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, dh, 2, dtype=t.dtype) / dh)
    angles = torch.outer(torch.arange(n, dtype=t.dtype), inv_freq)  # (n, dh/2)
    if convention == "interleaved":
        freqs_cis = torch.polar(torch.ones_like(angles), angles)
        tc = torch.view_as_complex(t.reshape(*t.shape[:-1], -1, 2).contiguous())
        return torch.view_as_real(tc * freqs_cis).flatten(-2)
    emb = torch.cat((angles, angles), dim=-1)
    half = torch.cat((-t[..., dh // 2:], t[..., : dh // 2]), dim=-1)
    return t * emb.cos() + half * emb.sin()


def rope_mha_forward(x, nheads, wq, wk, wv, wo, bq=None, bk=None, bv=None, bo=None, convention="interleaved",
                     theta=10000.0):  # pragma: no mutate block - unchecked
    """The rotary reference forward from explicit weights (nn.Linear convention), for the unit tests."""
    B, n, _ = x.shape
    d_out = wq.shape[0]
    dh = d_out // nheads
    lin = torch.nn.functional.linear
    split = lambda t: t.view(B, n, nheads, dh).transpose(1, 2)
    q, k, v = split(lin(x, wq, bq)), split(lin(x, wk, bk)), split(lin(x, wv, bv))
    q, k = rope(q, convention, theta), rope(k, convention, theta)
    scores = q @ k.transpose(2, 3) / dh ** 0.5
    future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), 1)
    w = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d_out)
    return lin(ctx, wo, bo)


RotaryMHA = CausalMHA  # the name it goes by outside the mutants (the class keeps the lesson's name)
