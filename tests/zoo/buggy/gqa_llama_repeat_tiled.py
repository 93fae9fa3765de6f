"""Buggy grouped-query attention in Meta's Llama style: `repeat_kv` written with `torch.Tensor.repeat` on the heads
axis, which tiles the key/value heads ([k0, k1, k0, k1]) instead of repeating each one n_rep times ([k0, k0, k1,
k1]): query heads are paired with the wrong key/value heads. Shapes are right; with one key/value head (or as many as
the heads) the output is right too, which is why a shape test or a multi-query test passes."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(bs, slen, n_kv_heads, head_dim) -> (bs, slen, n_kv_heads * n_rep, head_dim)"""
    if n_rep == 1:
        return x
    return x.repeat(1, 1, n_rep, 1)  # the mistake: tiles the heads; x[:, :, :, None].expand(...).reshape(...) is right


class Attention(nn.Module):
    def __init__(self, dim: int, n_heads: int, n_kv_heads: int, max_seq_len: int):
        super().__init__()
        assert dim % n_heads == 0 and n_heads % n_kv_heads == 0
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.n_rep = n_heads // n_kv_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def forward(self, x: torch.Tensor):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        keys, values = repeat_kv(xk, self.n_rep), repeat_kv(xv, self.n_rep)
        xq, keys, values = xq.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
        mask = torch.full((seqlen, seqlen), float("-inf"), device=x.device).triu(1)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim) + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)


TARGET = "Attention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "gqa-repeat-not-interleave"  # the mutant this mistake should be diagnosed as
