"""Grouped-query attention whose K/V projections ignore the number of key/value heads (full width)."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="gqa-kv-heads-ignored",
    task=("The layer takes a number of key/value heads, computes correct attention, and has as many parameters "
          "whatever that number is."),
    topic="sharing key/value heads",
    title="K/V projections of width d_out: the number of key/value heads is taken but never used",
    lesson=("Grouped-query attention saves parameters and cache by giving W_k and W_v kv_heads * dh rows instead "
            "of d_out: d_in·d_out + 2·d_in·(kv_heads·dh) + d_out² + d_out parameters."),
    killed_by=("param-count",),
    trace=("kv-projections-full-width",),
    symptom=("Every query head keeps its own key/value head: the layer is plain multi-head attention with the "
             "parameter count of it, not the grouped layer it claims to be."),
    remedy="Build the key and value projections for the number of key/value heads given, not for all the query heads.",
    fix="self.h, self.kv, self.dh = nheads, kv_heads, d_out // nheads",
    example=(
        "d = 8, H = 4, KV = 2, dh = 2: W_k and W_v should be Linear(8, 4): 8·8 + 2·8·4 + 8² + 8 = 200 parameters\n"
        "wrong: Linear(8, 8) each: 3·8·8 + 8² + 8 = 264, the plain multi-head count (K/V of 4 heads, not 2)"
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
        self.h, self.kv, self.dh = nheads, nheads, d_out // nheads  # BUG: kv_heads ignored, one K/V head per head
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
        k, v = (t.repeat_interleave(self.group, dim=1) for t in (k, v))  # (B, H, n, dh): head h uses h // group
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
