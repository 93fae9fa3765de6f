"""Buggy (a student's trial, trials/21 f04): the causal buffer is cut to the sequence on its rows only,
`self.bias[:T] == 0`: a (T, block_size) mask meets the (T, T) scores, and masked_fill raises for every T shorter than
the block.  Widths kept in a config dict."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class DictConfigAttention(nn.Module):
    def __init__(self, emb_dim, n_heads, context_length, qkv_bias=False):
        super().__init__()
        self.config = {
            "emb_dim": emb_dim,
            "n_heads": n_heads,
            "head_dim": emb_dim // n_heads,
            "context_length": context_length,
            "qkv_bias": qkv_bias,
        }
        assert self.config["head_dim"] * n_heads == emb_dim
        self.query = nn.Linear(emb_dim, emb_dim, bias=qkv_bias)
        self.key = nn.Linear(emb_dim, emb_dim, bias=qkv_bias)
        self.value = nn.Linear(emb_dim, emb_dim, bias=qkv_bias)
        self.out = nn.Linear(emb_dim, emb_dim)
        self.register_buffer("bias", torch.tril(torch.ones(context_length, context_length)))

    def forward(self, x):
        cfg = self.config
        B, T, _ = x.shape
        shape = (B, T, cfg["n_heads"], cfg["head_dim"])
        q = self.query(x).view(shape).transpose(1, 2)
        k = self.key(x).view(shape).transpose(1, 2)
        v = self.value(x).view(shape).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * cfg["head_dim"] ** -0.5
        att = att.masked_fill(self.bias[:T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, cfg["emb_dim"])
        return self.out(y)


TARGET = "DictConfigAttention"
EXPECT = ("output-shape",)
DIAGNOSIS = "mask-not-sliced"
LINE = 34
