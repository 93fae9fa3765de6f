"""Buggy (student style, kvcache-mask-not-offset): a KV cache kept on the module (`cache_k`, `cache_v`, a counter
`pos`), whose mask is cut from the top of `tril` on every call: a decoded token at position pos takes row 0 and sees
only the first token.

Style: Karpathy's `wei` and `tril`, W_q / W_k / W_v and `proj`, `forward(x, use_cache=False)` and `reset_cache()`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.W_q = nn.Linear(n_embd, n_embd, bias=False)
        self.W_k = nn.Linear(n_embd, n_embd, bias=False)
        self.W_v = nn.Linear(n_embd, n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.cache_k, self.cache_v, self.pos = None, None, 0

    def reset_cache(self):
        self.cache_k, self.cache_v, self.pos = None, None, 0

    def forward(self, x, use_cache=False):
        B, T, C = x.shape
        hs = C // self.n_head
        q = self.W_q(x).view(B, T, self.n_head, hs).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_head, hs).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_head, hs).transpose(1, 2)
        if use_cache:
            if self.cache_k is not None:
                k = torch.cat([self.cache_k, k], dim=2)
                v = torch.cat([self.cache_v, v], dim=2)
            self.cache_k, self.cache_v = k, v
            self.pos += T
        S = k.shape[2]
        wei = q @ k.transpose(-2, -1) * hs ** -0.5
        wei = wei.masked_fill(self.tril[:T, :S] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "CausalSelfAttention"
EXPECT = ("kv-cache",)
DIAGNOSIS = "kvcache-mask-not-offset"
LINE = 41  # the mask's rows taken from 0, not from the cached tokens' count
