"""Buggy (student style, mask-plain-attribute): the causal mask is kept as a plain tensor attribute,
`self.tril = torch.tril(torch.ones(block_size, block_size))`, not registered with register_buffer: model.to(device)
leaves it on the CPU and state_dict() misses it.  The report named the mistake with no line (the line is in
__init__, which the trace of forward does not run); the child notes where the constructor made each tensor.

Style: Karpathy's lecture names (`wei`, `tril`, `block_size`, `n_embd`, `n_head`), one fused Linear for q, k, v,
`proj` for the output projection.
"""
import torch
import torch.nn as nn
from torch.nn import functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.tril = torch.tril(torch.ones(block_size, block_size))

    def forward(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, hs).transpose(1, 2) for t in (q, k, v))
        wei = q @ k.transpose(-2, -1) * hs ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "MultiHeadAttention"
EXPECT = ("mask-buffer", "registered")
DIAGNOSIS = "mask-plain-attribute"
LINE = 21
