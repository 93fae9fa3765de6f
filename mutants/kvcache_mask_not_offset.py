"""With the cache on, the causal mask is cut from its first row instead of the row of the new tokens' position."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="kvcache-mask-not-offset",
    task="Generating with the cache on gives different tokens from generating without it; the first token is the same.",
    topic="the KV cache",
    title="KV cache: the causal mask is not offset by the number of cached tokens",
    lesson=("KV cache (the lesson's layer with a cache, in the style of LLMs-from-scratch ch04 03_kv-cache): the "
            "keys and values of the tokens seen are kept, each new token attends to all of them, and the cache is "
            "emptied between sequences."),
    killed_by=("kv-cache",),
    trace=("cache-mask-not-offset",),
    symptom=("Decoding one token at a time with the cache, each new token sees only the first token of the "
             "sequence: the mask's row 0 is used for a query that sits at position ptr, so every later key is "
             "masked out. The full forward (no cache) is right, so the bug hides until generation."),
    remedy=("Cut the mask rows at the new tokens' positions (from the cache's current position on), with as many "
            "columns as keys cached."),
    fix='scores = scores.masked_fill(self.mask[start:start + n, :k.shape[2]], float("-inf"))  # the new tokens\' rows',
    example=(
        "prefix of 2 tokens, then token 2 alone: its query is position 2, the cache holds keys 0, 1, 2\n"
        "right: mask rows [2:3] -> [F, F, F]: token 2 attends to keys 0, 1 and 2\n"
        "wrong: mask rows [0:1] -> [F, T, T]: token 2 attends to key 0 only, and its output is v_0 through W_o"
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
            start = self.ptr_current_pos  # the new queries' first position  # noqa: F841
            self.ptr_current_pos += n
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, H, tokens, dh)
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, tokens)
        scores = scores.masked_fill(self.mask[:n, :k.shape[2]], float("-inf"))  # BUG: rows from 0, not from start
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0
