"""The position pointer is set to the chunk's length instead of advanced by it."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="kvcache-position-not-advanced",
    task="With the cache on, the first generated token is right and the ones after it are not.",
    topic="the KV cache",
    title="KV cache: the position pointer is set, not advanced, after each call",
    lesson=("KV cache (the lesson's layer with a cache, in the style of LLMs-from-scratch ch04 03_kv-cache): the "
            "keys and values of the tokens seen are kept, each new token attends to all of them, and the cache is "
            "emptied between sequences."),
    killed_by=("kv-cache",),
    rewrite="advance",
    trace=("cache-position-set",),
    symptom=("ptr_current_pos must count every token cached so far; set to the last chunk's length instead, it "
             "is right after the prompt but falls back to 1 after each generated token, so later tokens take the "
             "mask row of position 1 and see only the first two tokens."),
    remedy="Advance the cache's position by the number of new tokens after each call.",
    fix="self.ptr_current_pos += n",
    example=(
        "prefix of 2 tokens: ptr = 2, right; token 2 alone: start = 2, right, then ptr = 1\n"
        "token 3 alone: start = 1: mask row 1 -> [F, F, T, T]: token 3 attends to keys 0 and 1 only\n"
        "right: ptr = 3 after token 2, row 3 -> [F, F, F, F]: token 3 attends to keys 0 to 3"
    ),
)


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
            self.ptr_current_pos = n  # BUG: set to the chunk's length, not advanced by it
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
