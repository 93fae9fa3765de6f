"""Hostile (red team 17): the lesson's layer with a KV cache whose mask rows are not offset by the cached tokens
(mutant kvcache-mask-not-offset: wrong at every decoded token), its cache switched on by a keyword and emptied by a
method of other names than mha-check drives (`generate=True`, `forget()`).  kv-cache finds no cache and passes as not
applying, a pass's points: 19 of 19 on Gradescope, for an assignment that is the layer with a cache.  A course that
asks for the cache says so in its rubric (`kv_cache = true`): kv-cache then fails it, saying why
(`tests/e2e/test_family_policy.py`)."""
import torch
import torch.nn as nn


class MyAttn(nn.Module):
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

    def forward(self, x, **options):  # generate=True: the cache, under a name mha-check does not know
        use_cache = options.get("generate", False)
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
            start = self.ptr_current_pos  # the new queries' first position  # noqa: F841
            self.ptr_current_pos += n
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, tokens, dh)
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, tokens)
        scores = scores.masked_fill(self.mask[:n, :k.shape[2]], float("-inf"))  # the mistake: rows from 0, not from start
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

    def forget(self):  # reset_cache() under another name
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0
