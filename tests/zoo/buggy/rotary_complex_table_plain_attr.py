"""Buggy (registered, with two lesson rules): Meta's Llama-style rotary attention, its complex rotation table
(torch.polar, applied with view_as_complex) kept as a plain attribute, `self.freqs_cis = ...`, and every projection
built with bias=False, no check that the heads divide the width.  The math is the reference's (rotated queries and
keys, interleaved pairs); `registered` fails on the plain tensor, and no mutant is its mistake, so nothing is named.
A student's trial: the report then said "mha-check trace marks the step that looks wrong (...:31)", the output
projection's line, which the rules' section already lists and which says nothing of the check that failed.

Style: Llama's `wq`/`wk`/`wv`/`wo`, `precompute_freqs_cis`, `apply_rotary_emb`, scaled_dot_product_attention.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def precompute_freqs_cis(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    t = torch.arange(end, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def apply_rotary_emb(xq, xk, freqs_cis):
    # xq, xk: (B, T, H, dh)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    fc = freqs_cis[None, :, None, :]
    xq_out = torch.view_as_real(xq_ * fc).flatten(3)
    xk_out = torch.view_as_real(xk_ * fc).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class RotaryAttention(nn.Module):
    def __init__(self, dim, n_heads, max_seq_len=2048):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.freqs_cis = precompute_freqs_cis(self.head_dim, max_seq_len)

    def forward(self, x):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, self.freqs_cis[:seqlen].to(x.device))
        xq, xk, xv = (t.transpose(1, 2) for t in (xq, xk, xv))
        out = F.scaled_dot_product_attention(xq, xk, xv, is_causal=True)
        out = out.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(out)


TARGET = "RotaryAttention"
EXPECT = ("registered", "out-proj-bias", "divisibility")
DIAGNOSIS = None  # a tensor kept as a plain attribute is no catalogued mistake but the mask's (mask-plain-attr)
