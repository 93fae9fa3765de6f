"""Buggy (student style, finite-fill-100, fixes28b item 4): an additive float mask for scaled_dot_product_attention
made in __init__ from zeros, the future written with -100 by an in-place masked_fill_ on the line after. The report
and trace had marked the `tril` it is filled through (line 21, a right mask); the line to change is the write.

Style: `W_q` / `W_k` / `W_v` / `proj`, `tril`, `att_bias`, SDPA with attn_mask.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(self, d_model, n_head, block_size):
        super().__init__()
        assert d_model % n_head == 0
        self.n_head = n_head
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model)
        tril = torch.tril(torch.ones(block_size, block_size))
        att_bias = torch.zeros(block_size, block_size)
        att_bias.masked_fill_(tril == 0, -100.0)
        self.register_buffer("att_bias", att_bias)

    def forward(self, x):
        B, T, C = x.shape
        q = self.W_q(x).view(B, T, self.n_head, -1).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_head, -1).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_head, -1).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=self.att_bias[:T, :T])
        return self.proj(out.transpose(1, 2).reshape(B, T, C))


TARGET = "Attn"
EXPECT = ("causal-leakage",)
DIAGNOSIS = "finite-fill-100"
LINE = 23
