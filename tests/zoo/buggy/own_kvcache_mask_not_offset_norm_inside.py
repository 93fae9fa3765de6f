"""Buggy (student style, kvcache-mask-not-offset, fixes28b item 2): a pre-norm layer (its LayerNorm applied inside
forward, read with it switched off) with a KV cache on the module, whose mask is cut from the top of `tril` on every
call. The report's kv-cache check decoded with the norm switched off and named the mistake, but `mha-check trace`
refused to decode a layer so called and marked nothing: the report gave no line.

Style: Karpathy's `wei` and `tril`, `ln`, W_q / W_k / W_v and `proj`, `forward(x, use_cache=False)`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(self, d_model, n_head, block_size):
        super().__init__()
        assert d_model % n_head == 0
        self.n_head = n_head
        self.ln = nn.LayerNorm(d_model)
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.cache_k, self.cache_v = None, None

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None

    def forward(self, x, use_cache=False):
        B, T, C = x.shape
        h = self.ln(x)
        q = self.W_q(h).view(B, T, self.n_head, -1).transpose(1, 2)
        k = self.W_k(h).view(B, T, self.n_head, -1).transpose(1, 2)
        v = self.W_v(h).view(B, T, self.n_head, -1).transpose(1, 2)
        if use_cache:
            if self.cache_k is not None:
                k = torch.cat([self.cache_k, k], dim=2)
                v = torch.cat([self.cache_v, v], dim=2)
            self.cache_k, self.cache_v = k, v
        S = k.shape[2]
        wei = q @ k.transpose(-2, -1) * (C // self.n_head) ** -0.5
        wei = wei.masked_fill(self.tril[:T, :S] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        return self.proj((wei @ v).transpose(1, 2).contiguous().view(B, T, C))


TARGET = "Attn"
EXPECT = ('kv-cache',)
DIAGNOSIS = 'kvcache-mask-not-offset'
LINE = 42
