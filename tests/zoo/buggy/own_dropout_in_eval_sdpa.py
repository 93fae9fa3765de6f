"""Buggy (student style, dropout-in-eval): scaled_dot_product_attention(..., dropout_p=self.attn_drop) at every
call; SDPA has no idea of the module's mode, so its dropout stays on after model.eval() and evaluation is random
(found by a student trial: the report named dropout-in-eval without a line, as trace marked only F.dropout).

Style: separate `W_q`, `W_k`, `W_v`, an output `proj`, a float `self.attn_drop`, SDPA with is_causal=True.
"""
import torch.nn as nn
import torch.nn.functional as F


class FlashAttn(nn.Module):
    def __init__(self, d_model, n_heads, attn_drop=0.1):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.attn_drop = attn_drop
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        B, T, C = x.shape
        q = self.W_q(x).view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_heads, C // self.n_heads).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))


TARGET = "FlashAttn"
EXPECT = ("eval-determinism",)
DIAGNOSIS = "dropout-in-eval"
LINE = 27
