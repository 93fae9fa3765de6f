"""The lesson's `CausalMHA` with a KV cache, in the style of rasbt's LLMs-from-scratch (ch04, 03_kv-cache).

`forward(x)` is the lesson's layer unchanged.  `forward(x, use_cache=True)` appends the new keys and values to
`cache_k`/`cache_v` (kept as (B, n, H, dh), before the transpose, so the tokens are axis 1) and masks with the rows
of the causal mask that belong to the new tokens: the queries sit at positions ptr .. ptr + n - 1 of the sequence,
where `ptr_current_pos` counts the tokens already cached.  `reset_cache()` empties the cache and the pointer between
sequences.  A prefix run followed by one token at a time then gives, at every position, the full forward's output.

The mutants `mutants/kvcache_*.py` are copies of this class with one deliberate bug each; keep it line for line.
"""
import torch
import torch.nn as nn


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, d_out=None, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d if d_out is None else d_out
        if d_out % nheads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by nheads={nheads}")
        self.h, self.dh = nheads, d_out // nheads
        self.q, self.k, self.v = (nn.Linear(d, d_out, bias=qkv_bias) for _ in range(3))
        self.out = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        self.ptr_current_pos = 0

    def forward(self, x, use_cache=False):
        B, n, _ = x.shape
        d = self.h * self.dh
        q = self.q(x).view(B, n, self.h, self.dh)  # (B, n, H, dh)
        k, v = self.k(x).view(B, n, self.h, self.dh), self.v(x).view(B, n, self.h, self.dh)
        start = 0
        if use_cache:
            if self.cache_k is None:
                self.cache_k, self.cache_v = k, v
            else:
                self.cache_k = torch.cat([self.cache_k, k], dim=1)  # append along the tokens
                self.cache_v = torch.cat([self.cache_v, v], dim=1)
            k, v = self.cache_k, self.cache_v
            start = self.ptr_current_pos  # the new queries' first position
            self.ptr_current_pos += n
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, tokens, dh)
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, tokens)
        scores = scores.masked_fill(self.mask[start:start + n, :k.shape[2]], float("-inf"))  # the new tokens' rows
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0
