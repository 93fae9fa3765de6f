"""Buggy: the output projection's bias follows config.bias, so with bias=False it has no bias.

Style: nanoGPT's CausalSelfAttention(config) exactly as in the repository, where c_proj is
nn.Linear(n_embd, n_embd, bias=config.bias). The lesson's layer always has an output bias (the "+ d_out" in the
parameter count); with config.bias=False (no Q/K/V bias) this one has d_out parameters too few and cannot
represent the lesson's function (it is the lesson's function with the output bias pinned at zero).
"""
import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                           dropout_p=self.dropout if self.training else 0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


TARGET = "CausalSelfAttention"
EXPECT = ("param-count",)
DIAGNOSIS = "out-proj-no-bias"  # the mutant this mistake should be diagnosed as
