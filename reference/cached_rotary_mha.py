"""The lesson's `CausalMHA` with rotary position embedding and a KV cache: reference/rotary_mha.py's rotation (the
interleaved pairs of each head turned by position * inv_freq) and reference/cached_mha.py's cache, together.

With the cache, a call's tokens do not start at position 0: they sit at ptr .. ptr + n - 1, where `ptr_current_pos`
counts the tokens already cached, so their queries and keys are rotated by those positions, and the keys kept in the
cache stay rotated by theirs.  `forward(x)` is the rotary layer unchanged; `forward(x, use_cache=True)` appends the
new (rotated) keys and values, takes the new tokens' rows of the causal mask and advances the pointer;
`reset_cache()` empties the cache and the pointer.  The mutants `mutants/kvcache_rope_*.py` are copies of this class
with one deliberate bug each; keep it line for line.
"""
import torch
import torch.nn as nn


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False, theta=10000.0):
        super().__init__()
        d_out = d if d_out is None else d_out
        if d_out % nheads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by nheads={nheads}")
        self.h, self.dh = nheads, d_out // nheads
        self.q, self.k, self.v = (nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3))
        self.out = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())
        inv_freq = theta ** (-torch.arange(0, self.dh, 2) / self.dh)  # (dh/2,) frequencies from the head width
        angles = torch.outer(torch.arange(context_length), inv_freq)  # (context_length, dh/2)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        self.ptr_current_pos = 0

    def rotate(self, t, pos):  # t: (B, H, n, dh), the pairs (t0, t1), (t2, t3), ... turned by pos * inv_freq
        cos, sin = self.cos[pos], self.sin[pos]  # (n, dh/2)
        a, b = t[..., 0::2], t[..., 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)

    def forward(self, x, use_cache=False):
        B, n, _ = x.shape
        d = self.h * self.dh
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        start = self.ptr_current_pos if use_cache else 0  # the new tokens' first position
        pos = torch.arange(start, start + n, device=x.device)
        q, k = self.rotate(q, pos), self.rotate(k, pos)  # rotary: queries and keys only, at their own positions
        if use_cache:
            if self.cache_k is None:
                self.cache_k, self.cache_v = k, v
            else:
                self.cache_k = torch.cat([self.cache_k, k], dim=2)  # append along the tokens
                self.cache_v = torch.cat([self.cache_v, v], dim=2)
            k, v = self.cache_k, self.cache_v
            self.ptr_current_pos += n
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, tokens)
        scores = scores.masked_fill(self.mask[start:start + n, :k.shape[2]], float("-inf"))  # the new tokens' rows
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0
