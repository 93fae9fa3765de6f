"""Meta-llama-style rotary attention: wq/wk/wv/wo, a complex `freqs_cis` buffer from precompute_freqs_cis, the queries
and keys viewed as complex numbers (consecutive pairs) and multiplied by it, an additive -inf mask made in forward,
the softmax in float32; the heads laid out (B, n, H, dh) until the scores."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "Attention"


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device).float()
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)


def apply_rotary_emb(xq, xk, freqs_cis):
    xq_ = torch.view_as_complex(xq.double().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.double().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = freqs_cis[None, :, None, :]
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


class Attention(nn.Module):
    def __init__(self, dim, n_heads, max_seq_len, rope_theta=10000.0):
        super().__init__()
        assert dim % n_heads == 0
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=True)
        self.register_buffer("freqs_cis", precompute_freqs_cis(self.head_dim, max_seq_len, rope_theta),
                             persistent=False)

    def forward(self, x):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, self.freqs_cis[:seqlen])
        xq, xk, xv = xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2)
        scores = torch.matmul(xq, xk.transpose(2, 3)) / math.sqrt(self.head_dim)
        mask = torch.full((seqlen, seqlen), float("-inf"), device=x.device).triu(1)
        scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, xv).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)
