"""Correct: rotary attention as complex numbers (torch.view_as_complex, Meta llama's precompute_freqs_cis), whose
table is built as `torch.polar(torch.ones(end, dim // 2), torch.outer(t.float(), freqs.float()))`: in float32, as
the student builds it, the two halves agree; under torch's default dtype float64 (mha-check's own) torch.ones is
float64 and torch.polar raises. The constructor had failed (`construct` FAIL, every other check skipped) for
mha-check's choice of dtype: it is built under float32 and cast, and passes (student11).

Style: `precompute_freqs` / `apply_rope` functions, `wq` / `wk` / `wv` / `wo`, rotation before the heads' transpose,
an additive -inf mask made in forward.
"""
import torch
import torch.nn as nn

TARGET = "RoPEAttention"


def precompute_freqs(dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))
    t = torch.arange(end).float()
    return torch.polar(torch.ones(end, dim // 2), torch.outer(t, freqs))


def apply_rope(x, freqs):
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    out = torch.view_as_real(xc * freqs).flatten(-2)
    return out.type_as(x)


class RoPEAttention(nn.Module):
    def __init__(self, dim, n_heads, max_seq_len):
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"dim={dim} is not divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim)
        self.register_buffer("freqs_cis", precompute_freqs(self.head_dim, max_seq_len), persistent=False)

    def forward(self, x):
        bsz, seqlen, _ = x.shape
        q = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        k = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        v = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        f = self.freqs_cis[:seqlen].view(1, seqlen, 1, -1)
        q, k = apply_rope(q, f), apply_rope(k, f)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        scores = q @ k.transpose(2, 3) / self.head_dim ** 0.5
        mask = torch.full((seqlen, seqlen), float("-inf"), device=x.device).triu(1)
        scores = (scores + mask).softmax(dim=-1)
        out = (scores @ v).transpose(1, 2).reshape(bsz, seqlen, -1)
        return self.wo(out)
