"""With the cache on, the new tokens are rotated from position 0 on every call instead of from the cached tokens'."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="kvcache-rope-positions-not-advanced",
    task=("A rotary layer with a KV cache gives the full forward's outputs for the prompt; each token generated with "
          "the cache on after it differs."),
    topic="the KV cache",
    title="KV cache with rotary embeddings: the new tokens are rotated from position 0 on every call, not from ptr",
    lesson=("Rotary position embedding turns each query and key by its token's position, so that a score depends on "
            "how far apart two tokens are. With a KV cache a call's tokens sit at positions ptr .. ptr + n - 1: "
            "their queries and keys are rotated by those, and the cached keys keep theirs."),
    killed_by=("kv-cache",),
    trace=("cache-rope-from-zero",),
    symptom=("The prompt is right: its tokens do start at 0. Every token decoded after it is rotated as if it were "
             "the first token of the sequence, so its query meets the cached keys at the wrong distances (and its "
             "own key goes into the cache at position 0): the cached outputs drift from the full forward's."),
    remedy=("Rotate the new tokens by their real positions: start at the number of tokens already in the cache, "
            "not at 0."),
    fix="pos = torch.arange(start, start + n, device=x.device)",
    example=(
        "prompt of 2 tokens: positions 0, 1, right; then token 2 alone\n"
        "right: pos = arange(2, 3) = [2]: q_2, k_2 turned by 2·inv_freq; q_2·k_0 depends on 2 - 0\n"
        "wrong: pos = arange(1) = [0]: q_2, k_2 turned by 0, as token 0; q_2·k_0 depends on 0 - 0, q_2·k_1 on 0 - 1\n"
        "the full forward (no cache) starts at 0 and is right: only generating shows it"
    ),
)


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
        pos = torch.arange(n, device=x.device)  # BUG: from 0 on every call, not from start
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
