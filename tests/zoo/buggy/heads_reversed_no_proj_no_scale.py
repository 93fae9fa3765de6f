"""Buggy (two mistakes at once, no-scaling and no-output-projection, with the heads merged in reverse order): the
scores are never divided by sqrt(head width), and the heads, concatenated last head first, are returned as they
are, with no output projection.

Style: nanoGPT's CausalSelfAttention(config) without its `c_proj`: a fused `c_attn` (rows q; k; v) and a `bias` tril
buffer; the merge is `torch.cat([y[:, h] for h in reversed(range(self.n_head))], dim=-1)`.  Read without an output
projection (W_o the identity), the reversed merge is the lesson's layer with the row blocks of W_q, W_k and W_v read
last head first: no mistake; the missing scale and the missing projection are, each named at its line (before, no
reading reproduced the layer: every weight check could not tell, and only the missing projection was named).
"""
import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size)))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = q @ k.transpose(-2, -1)
        att = att.masked_fill(self.bias[:T, :T] == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        y = torch.cat([y[:, h] for h in reversed(range(self.n_head))], dim=-1)
        return y


TARGET = "CausalSelfAttention"
EXPECT = ("reference-match", "gradient-match", "param-count", "out-proj-bias")
DIAGNOSIS = ("no-scaling", "no-output-projection")  # both named, each at its line
MUST_PASS = ("view-order", "head-invariance", "causal-leakage")  # judged under the reading without W_o, and right
