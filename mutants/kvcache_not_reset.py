"""reset_cache() empties the cached keys and values but leaves the position pointer where the last sequence ended."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="kvcache-not-reset",
    task="The first generation with the cache is right; the next one, after reset_cache(), goes wrong or crashes.",
    topic="the KV cache",
    title="KV cache: reset_cache() does not reset the position pointer",
    lesson=("KV cache (the lesson's layer with a cache, in the style of LLMs-from-scratch ch04 03_kv-cache): the "
            "keys and values of the tokens seen are kept, each new token attends to all of them, and the cache is "
            "emptied between sequences."),
    killed_by=("kv-cache",),
    trace=("cache-not-reset",),
    symptom=("Between sequences the cache must be emptied completely; here the pointer keeps counting, so the "
             "second sequence's queries take mask rows that belong to positions after the first sequence: wrong "
             "masking, or a shape error once the rows run past context_length."),
    remedy="Reset the cache's position to 0 together with the cached keys and values.",
    fix="self.ptr_current_pos = 0  # in reset_cache(), with the keys and values",
    example=(
        "context_length = 7, a first sequence of 5 tokens leaves ptr_current_pos = 5\n"
        "reset_cache() sets cache_k = cache_v = None but not ptr_current_pos\n"
        "second sequence, prefix of 3 tokens: mask rows [5:8] of a (7, 7) mask -> only 2 rows for 3 queries: "
        "RuntimeError"
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
            self.ptr_current_pos += n
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, tokens, dh)
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, tokens)
        scores = scores.masked_fill(self.mask[start:start + n, :k.shape[2]], float("-inf"))  # the new tokens' rows
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None  # BUG: ptr_current_pos is not set back to 0
