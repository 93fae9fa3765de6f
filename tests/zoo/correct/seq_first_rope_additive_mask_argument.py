"""Correct: a SEQUENCE-FIRST rotary layer, (T, B, C) in and out, whose causal mask is a forward ARGUMENT: an
additive float (T, T) tensor of 0 and -inf that the caller builds (as fairseq and ESM do), and interleaved-pair RoPE
(base 10000) on q and k computed in forward from the positions 0..T-1. Called the usual way, (B, n, d), the (n, n)
mask cannot be added to its scores (it reads the batch as the tokens): mha-check must try the masked calls sequence
first, under the rotary conventions too.

Style: separate query/key/value/output Linear layers named wq, wk, wv, wo (no biases but wo's), heads folded into the
batch as (B * H, T, hd) with bmm, the rotation written with complex numbers, the mask given by keyword `attn_bias`.
"""
import torch
import torch.nn as nn


class RotarySeqFirstAttention(nn.Module):
    def __init__(self, dim, n_heads, base=10000.0):
        super().__init__()
        assert dim % n_heads == 0 and (dim // n_heads) % 2 == 0
        self.n_heads, self.hd, self.base = n_heads, dim // n_heads, base
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim)

    def rotate(self, t):  # t: (B * H, T, hd), pairs (t0, t1), (t2, t3), ... turned by position * base ** (-2i / hd)
        T = t.shape[1]
        freqs = self.base ** (-torch.arange(0, self.hd, 2, dtype=t.dtype, device=t.device) / self.hd)
        angles = torch.outer(torch.arange(T, dtype=t.dtype, device=t.device), freqs)
        turned = torch.view_as_complex(t.reshape(*t.shape[:-1], -1, 2).contiguous()) * torch.polar(
            torch.ones_like(angles), angles)
        return torch.view_as_real(turned).flatten(-2)

    def forward(self, x, attn_bias=None):
        T, B, C = x.shape
        fold = lambda t: t.reshape(T, B * self.n_heads, self.hd).transpose(0, 1)  # (B * H, T, hd)
        q, k, v = fold(self.wq(x)), fold(self.wk(x)), fold(self.wv(x))
        q, k = self.rotate(q), self.rotate(k)
        scores = torch.bmm(q, k.transpose(1, 2)) / self.hd ** 0.5
        if attn_bias is not None:
            scores = scores + attn_bias
        out = torch.bmm(scores.softmax(-1), v).transpose(0, 1).reshape(T, B, C)
        return self.wo(out)


TARGET = "RotarySeqFirstAttention"
EXPECT = ()
