"""Correct, for heads at least 256 wide only: a class written for one large model's kernel, whose guard refuses every
narrower head (and a width the heads do not divide).

Style: the lesson's layer with `dim`, `n_heads`, `max_seq_len`, fused `qkv`, `proj`, and two guards: divisibility,
then `head_dim >= 256`.  mha-check builds heads of width 2 to 128 (construct retries the lesson's configurations
with heads of width 8, 16, 32, 64 and 128, keeping the heads); the class refuses all of them and the indivisible
width too, so nothing it builds shows anything of its math: construct is cannot-tell, never a failure, and
divisibility-inverted is never named (it builds no indivisible width).  No --arg of the constructor changes the head
width it accepts.
"""
import torch
import torch.nn as nn

TARGET = "WideHeadsOnly"
CANNOT_TELL = ("construct",)
SAYS = ("refuses every configuration mha-check makes", "heads of width 8, 16, 32, 64, 128", "--arg NAME=VALUE")
ARG = None


class WideHeadsOnly(nn.Module):
    def __init__(self, dim, n_heads, max_seq_len):
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"dim={dim} is not divisible by n_heads={n_heads}")
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        if self.head_dim < 256:
            raise ValueError(f"head_dim={self.head_dim}: this kernel needs heads at least 256 wide")
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.triu(torch.ones(max_seq_len, max_seq_len, dtype=torch.bool), 1))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-2, -1)) / self.head_dim ** 0.5
        att = torch.softmax(att.masked_fill(self.mask[:T, :T], float("-inf")), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
