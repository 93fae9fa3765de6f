"""Buggy (student style, kvcache-chunk-unmasked, with a scaled residual inside): the layer returns
x + 0.5 * linears[3](attention), which no reading of its weights as the lesson's W_q, W_k, W_v, W_o reproduces, and its
KV cache (kept on the module, `use_cache=True`, `reset_cache()`) masks only the prompt's call: one token per call is
right, but two new tokens fed in one call after the prompt see each other.  Nothing of the math can be compared with
the reference, yet the leak shows without the weights: the first new token's output moves with the second's input.

Style: the Annotated Transformer's four `linears` in a ModuleList, a scaled residual of the student's own, `self.cache_k` / `self.cache_v` / `self.pos`, heads by
view + transpose, a `causal` buffer from torch.tril.
"""
import torch
import torch.nn as nn


class ScaledResidualCachedAttention(nn.Module):
    def __init__(self, d_model, num_heads, max_len):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.linears = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(4)])  # q, k, v, out
        self.alpha = 0.5  # residual scale
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len)).bool())
        self.cache_k, self.cache_v, self.pos = None, None, 0

    def reset_cache(self):
        self.cache_k, self.cache_v, self.pos = None, None, 0

    def forward(self, x, use_cache=False):
        B, T, D = x.shape
        split = lambda t: t.view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        q, k, v = (split(lin(x)) for lin in self.linears[:3])
        if use_cache:
            if self.cache_k is not None:
                k = torch.cat([self.cache_k, k], dim=2)
                v = torch.cat([self.cache_v, v], dim=2)
            self.cache_k, self.cache_v = k, v
        att = (q @ k.transpose(-2, -1)) / self.head_dim ** 0.5
        if not use_cache or self.pos == 0:
            att = att.masked_fill(~self.causal[:T, :T], float("-inf"))
        att = att.softmax(dim=-1)
        out = (att @ v).transpose(1, 2).reshape(B, T, D)
        if use_cache:
            self.pos += T
        return x + self.alpha * self.linears[3](out)


TARGET = "ScaledResidualCachedAttention"
EXPECT = ("kv-cache",)
DIAGNOSIS = "kvcache-chunk-unmasked"
LINE = 37  # the mask applied only on an empty cache (or without one)
