"""With the cache on, only the prompt is masked: new tokens fed after cached ones are not masked among themselves."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="kvcache-chunk-unmasked",
    task=("Generating one token at a time with the cache on gives the same tokens as without it, but feeding two "
          "new tokens in one call after the prompt does not."),
    topic="the KV cache",
    title="KV cache: the causal mask is applied to the prompt only, not to several new tokens fed after cached ones",
    lesson=("KV cache (the lesson's layer with a cache, in the style of LLMs-from-scratch ch04 03_kv-cache): the "
            "keys and values of the tokens seen are kept, and the new tokens of a call take rows ptr .. ptr + n - 1 "
            "of the causal mask, so each sees every cached key and the call's tokens up to itself."),
    killed_by=("kv-cache",),
    trace=("cache-chunk-unmasked",),
    symptom=("One new token per call is right: it may see every cached key, so the mask it skips would have hidden "
             "nothing. A call with two or more new tokens after the prompt (chunked prefill, speculative decoding, "
             "a second prompt appended to the first) lets each of them see the ones after it."),
    remedy=("Mask every call, cached or not: the new tokens' rows of the mask, offset by the cache's length, over "
            "every key held so far."),
    fix=('scores = scores.masked_fill(self.mask[start:start + n, :k.shape[2]], float("-inf"))  # on every call, '
         'not under `if start == 0`'),
    example=(
        "prefix of 2 tokens, then tokens 2 and 3 in one call: queries at positions 2, 3, the cache holds keys 0..3\n"
        "right: mask rows [2:4] -> [F, F, F, T], [F, F, F, F]: token 2 does not see token 3\n"
        "wrong: no mask once ptr > 0: token 2 attends to keys 0..3, token 3 among them\n"
        "one token per call: row ptr is all F over the cached keys, so masking or not gives the same output"
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
        if start == 0:  # BUG: masks the prompt only, "a new token may see the whole cache"
            scores = scores.masked_fill(self.mask[start:start + n, :k.shape[2]], float("-inf"))  # the new tokens' rows
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
        self.ptr_current_pos = 0
