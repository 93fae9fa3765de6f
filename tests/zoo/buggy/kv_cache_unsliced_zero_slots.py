"""Buggy (fixes28 item 5): a KV cache preallocated with zeros for context_length positions (LLMs-from-scratch
ch04's optimised cache: written in place at ptr), read back whole: the attention reads every slot, the zeros after
the tokens fed so far included. The prompt's mask (rows from ptr, over every key) hides the slots after it, and so
does a chunk's; a single decoded token is left unmasked ("it may see every cached key"), so it gives weight e^0 to
each empty slot, whose value is 0: its output shrinks towards the output projection's bias. The plain forward never
reads the cache and passes every check; kv-cache fails, and the cache read unsliced is told at its line.

Style: ch04's `forward(x, use_cache=False)` with `reset_cache()` and `ptr`, fused qkv, a registered triu mask.
"""
import torch
import torch.nn as nn

TARGET = "PreallocatedCacheMHA"
EXPECT = ("kv-cache",)
DIAGNOSIS = None  # no catalogued mistake is this one: kv-cache fails, and the line is told
LINE = 49
MUST_PASS = ("reference-match", "gradient-match", "causal-leakage")


class PreallocatedCacheMHA(nn.Module):
    def __init__(self, d_in, d_out, context_length, num_heads, dropout=0.0, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.num_heads, self.head_dim, self.context_length = num_heads, d_out // num_heads, context_length
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool(),
                             persistent=False)
        self.cache_k = self.cache_v = None
        self.ptr = 0

    def reset_cache(self):
        self.cache_k = self.cache_v = None
        self.ptr = 0

    def forward(self, x, use_cache=False):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        start = 0
        if use_cache:
            if self.cache_k is None or self.cache_k.shape[0] != b:
                shape = (b, self.num_heads, self.context_length, self.head_dim)
                self.cache_k = torch.zeros(shape, dtype=x.dtype, device=x.device)
                self.cache_v = torch.zeros(shape, dtype=x.dtype, device=x.device)
            start = self.ptr
            self.cache_k[:, :, start:start + n] = k
            self.cache_v[:, :, start:start + n] = v
            k, v = self.cache_k, self.cache_v  # every slot, the zeros after ptr + n too
            self.ptr += n
        scores = q @ k.transpose(2, 3) / self.head_dim ** 0.5
        if n > 1:  # a single new token may see every cached key: no mask needed
            scores = scores.masked_fill(self.mask[start:start + n, :k.shape[2]], float("-inf"))
        weights = self.dropout(torch.softmax(scores, dim=-1))
        context = (weights @ v).transpose(1, 2).contiguous().view(b, n, -1)
        return self.out_proj(context)
