"""Buggy (student style, kvcache-not-reset): the cache is a dict of keys and values beside a position counter `t`;
reset_cache() makes a fresh dict and forgets the counter, so the next sequence's tokens take mask rows after the
first sequence's (wrong masking, or a shape error past the block size).

Style: `att`, a boolean `causal` buffer, W_q / W_k / W_v and `proj`, `forward(x, use_cache=False)`.
"""
import torch
import torch.nn as nn


class KVCacheAttention(nn.Module):
    def __init__(self, d_model, n_heads, max_len):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("d_model must be divisible by n_heads")
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.register_buffer("causal", torch.ones(max_len, max_len, dtype=torch.bool).triu(1))
        self.cache = {"k": None, "v": None}
        self.t = 0

    def reset_cache(self):
        self.cache = {"k": None, "v": None}

    def forward(self, x, use_cache=False):
        B, T, D = x.shape
        split = lambda z: z.view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        q, k, v = split(self.W_q(x)), split(self.W_k(x)), split(self.W_v(x))
        t0 = 0
        if use_cache:
            if self.cache["k"] is not None:
                k = torch.cat([self.cache["k"], k], dim=2)
                v = torch.cat([self.cache["v"], v], dim=2)
            self.cache = {"k": k, "v": v}
            t0 = self.t
            self.t += T
        att = q @ k.transpose(-2, -1) / self.d_head ** 0.5
        att = att.masked_fill(self.causal[t0:t0 + T, :k.shape[2]], float("-inf"))
        att = att.softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(B, T, D))


TARGET = "KVCacheAttention"
EXPECT = ("kv-cache",)
DIAGNOSIS = "kvcache-not-reset"
LINE = 26  # reset_cache() empties the keys and values but not the counter t
