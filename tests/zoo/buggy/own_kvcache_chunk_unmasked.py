"""Buggy (student style, kvcache-chunk-unmasked): a KV cache handed back and forth as a `past_kv` dict, masked only
when there is no past ("a new token may look at everything cached"): right for one token per call, but two new
tokens fed in one call after the prompt see each other.

Style: Karpathy's `wei` and `tril`, W_q / W_k / W_v and `proj`, heads folded into the batch for torch.bmm,
`forward(x, past_kv=None)` returning `(out, {"k": ..., "v": ...})`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class CachedAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head, self.hs = n_head, n_embd // n_head
        self.W_q = nn.Linear(n_embd, n_embd, bias=False)
        self.W_k = nn.Linear(n_embd, n_embd, bias=False)
        self.W_v = nn.Linear(n_embd, n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x, past_kv=None):
        B, T, C = x.shape
        heads = lambda t: t.view(B, -1, self.n_head, self.hs).transpose(1, 2).reshape(B * self.n_head, -1, self.hs)
        q, k, v = heads(self.W_q(x)), heads(self.W_k(x)), heads(self.W_v(x))
        if past_kv is not None:
            k = torch.cat([past_kv["k"], k], dim=1)
            v = torch.cat([past_kv["v"], v], dim=1)
        wei = torch.bmm(q, k.transpose(1, 2)) * self.hs ** -0.5
        if past_kv is None:
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        out = torch.bmm(wei, v).view(B, self.n_head, T, self.hs).transpose(1, 2).reshape(B, T, C)
        return self.proj(out), {"k": k, "v": v}


TARGET = "CachedAttention"
EXPECT = ("kv-cache",)
DIAGNOSIS = "kvcache-chunk-unmasked"
LINE = 32  # the mask applied only when nothing is cached
