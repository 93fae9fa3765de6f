"""Buggy: the fused c_attn output is unpacked as k, q, v instead of q, k, v.

Style: nanoGPT's CausalSelfAttention(config) with SDPA. nanoGPT's comment says "key, query, value projections for
all heads", and the author unpacked in that order. Since the rows of c_attn.weight are conventionally q; k; v
(as in GPT-2 checkpoints), the roles of the first two blocks are swapped: the scores become K Q^T, the transpose of
the intended score matrix before masking. Shape, mask and parameter count are fine.
"""
import torch
import torch.nn as nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout

    def forward(self, x):
        B, T, C = x.size()
        k, q, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None,
                                           dropout_p=self.dropout if self.training else 0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


TARGET = "CausalSelfAttention"
EXPECT = ("reference-match",)
DIAGNOSIS = "swapped-q-k"  # the mutant this mistake should be diagnosed as
