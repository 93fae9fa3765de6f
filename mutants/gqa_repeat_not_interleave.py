"""Grouped-query attention whose key/value heads are tiled with `.repeat` instead of `repeat_interleave`."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="gqa-repeat-not-interleave",
    task=("A grouped-query layer (4 query heads, 2 key/value heads) gives other outputs than the reference; with one "
          "key/value head, or as many as the query heads, it is right."),
    topic="sharing key/value heads",
    title="Key/value heads expanded with .repeat instead of .repeat_interleave: query heads paired with the wrong "
          "key/value heads",
    lesson=("Grouped-query attention shares each key/value head among a group of consecutive query heads: query head "
            "h uses key/value head h // group, which repeat_interleave(group, dim=1) gives; .repeat(1, group, 1, 1) "
            "tiles the heads instead (h % kv_heads)."),
    killed_by=("reference-match", "gradient-match"),
    trace=("kv-heads-tiled",),
    rewrite="repeat",
    symptom=("Query heads read the keys and values of another group: with 4 heads and 2 key/value heads, heads 1 "
             "and 2 use the wrong ones. The shapes are right, so nothing crashes, and with one key/value head (or "
             "as many as the heads) the output is even correct."),
    remedy=("Share each key/value head with consecutive query heads: repeat_interleave along the heads axis, not "
            "repeat."),
    fix="k, v = (t.repeat_interleave(self.group, dim=1) for t in (k, v))  # (B, H, n, dh): head h uses h // group",
    variant={"kv_pairing": "repeat"},
    example=(
        "H = 4 query heads, KV = 2 key/value heads, group = 2; k has heads [k0, k1]\n"
        "right: k.repeat_interleave(2, dim=1) -> [k0, k0, k1, k1]: query heads 0, 1 share k0; 2, 3 share k1\n"
        "wrong: k.repeat(1, 2, 1, 1)          -> [k0, k1, k0, k1]: head 1 reads k1 and head 2 reads k0\n"
        "KV = 1 (multi-query) or KV = H: both give the same order, which is why a test with those passes"
    ),
)


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length, kv_heads, d_out=None, dropout=0.0, qkv_bias=False):
        super().__init__()
        d_out = d if d_out is None else d_out
        if d_out % nheads != 0:
            raise ValueError(f"d_out={d_out} is not divisible by nheads={nheads}")
        if nheads % kv_heads != 0:
            raise ValueError(f"nheads={nheads} is not divisible by kv_heads={kv_heads}")
        self.h, self.kv, self.dh = nheads, kv_heads, d_out // nheads
        self.group = self.h // self.kv  # query heads per key/value head
        self.q = nn.Linear(d, d_out, bias=qkv_bias)
        self.k, self.v = (nn.Linear(d, self.kv * self.dh, bias=qkv_bias) for _ in range(2))
        self.out = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, _ = x.shape
        d = self.h * self.dh
        q = self.q(x).view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        k = self.k(x).view(B, n, self.kv, self.dh).transpose(1, 2)  # (B, KV, n, dh)
        v = self.v(x).view(B, n, self.kv, self.dh).transpose(1, 2)
        k, v = (t.repeat(1, self.group, 1, 1) for t in (k, v))  # BUG: tiles the K/V heads: head h uses h % KV
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
