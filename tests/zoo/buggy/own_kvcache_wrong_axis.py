"""Buggy (student style, kvcache-wrong-axis): the cache holds (B, heads, tokens, hs) tensors, and a new token's keys
are appended with `dim=1`, the heads' axis: the prompt runs, the first generated token raises.

Style: Karpathy's `wei` and `tril`, a `past_kv` tuple handed back and forth (`forward(x, past_kv=None,
use_cache=False)` returns `(out, present)`), W_q / W_k / W_v and `proj`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.W_q = nn.Linear(n_embd, n_embd, bias=False)
        self.W_k = nn.Linear(n_embd, n_embd, bias=False)
        self.W_v = nn.Linear(n_embd, n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x, past_kv=None, use_cache=False):
        B, T, C = x.shape
        hs = C // self.n_head
        q = self.W_q(x).view(B, T, self.n_head, hs).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_head, hs).transpose(1, 2)
        past = 0
        if past_kv is not None:
            past = past_kv[0].shape[2]
            k = torch.cat((past_kv[0], k), dim=1)
            v = torch.cat((past_kv[1], v), dim=2)
        present = (k, v) if use_cache else None
        wei = q @ k.transpose(-2, -1) * hs ** -0.5
        wei = wei.masked_fill(self.tril[past:past + T, :past + T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out), present


TARGET = "MultiHeadAttention"
EXPECT = ("kv-cache",)
DIAGNOSIS = "kvcache-wrong-axis"
LINE = 32  # the keys appended along the heads' axis
