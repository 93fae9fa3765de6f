"""Buggy (student style, dropout-on-mask): the 0/1 `hide` buffer (1 above the diagonal) goes through the attention
dropout before it is compared with 1, so in train() mode with dropout > 0 some future positions are no longer
hidden (a dropped 1 becomes 0, a kept one 1 / (1 - p)).

Style: einsum for the scores and the mix, `to_qkv` unpacked with unbind, `logits` for the scores, an `nn.Dropout`
called `attn_dropout`, a constructor of `hidden, n_heads, max_positions, attn_pdrop`.
"""
import torch
import torch.nn as nn


class DroppedMask(nn.Module):
    def __init__(self, hidden, n_heads, max_positions, attn_pdrop=0.1):
        super().__init__()
        assert hidden % n_heads == 0
        self.n_heads, self.head_dim = n_heads, hidden // n_heads
        self.to_qkv = nn.Linear(hidden, 3 * hidden)
        self.to_out = nn.Linear(hidden, hidden)
        self.attn_dropout = nn.Dropout(attn_pdrop)
        self.register_buffer("hide", torch.triu(torch.ones(max_positions, max_positions), diagonal=1))

    def forward(self, x):
        b, n, h = x.shape
        q, k, v = self.to_qkv(x).view(b, n, 3, self.n_heads, self.head_dim).unbind(dim=2)
        logits = torch.einsum("bqhd,bkhd->bhqk", q, k) / self.head_dim ** 0.5
        hide = self.attn_dropout(self.hide[:n, :n]) > 0
        logits = logits.masked_fill(hide, float("-inf"))
        probs = self.attn_dropout(logits.softmax(dim=-1))
        return self.to_out(torch.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, n, h))


TARGET = "DroppedMask"
EXPECT = ("causal-leakage",)
DIAGNOSIS = "dropout-on-mask"
LINE = 26
