"""Grouped-query attention whose causal mask is applied to the first group of query heads only."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="gqa-mask-one-group",
    task=("In a grouped-query layer some heads' outputs depend on later tokens; with one key/value head (every query "
          "head in one group) nothing leaks."),
    topic="sharing key/value heads",
    title="Causal mask applied to the query heads of the first key/value group only",
    lesson=("Grouping shares keys and values, not the mask: every query head's scores (B, H, n, n) are masked, "
            "whichever key/value head it uses."),
    killed_by=("causal-leakage", "reference-match"),
    symptom=("The query heads outside the first group see the future: their outputs change when later tokens "
             "change. With a single key/value head the first group is every head, so a multi-query test passes."),
    remedy=("Apply the causal mask to the scores of every head, after the key/value heads are shared out to all "
            "query heads."),
    fix='scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))',
    trace=("mask-on-some-heads",),
    variant={"kv_mask": "first-group"},
    example=(
        "H = 4, KV = 2, group = 2: scores (B, 4, n, n)\n"
        "wrong: scores[:, :2] masked: heads 0 and 1 causal, heads 2 and 3 attend to every token, future included\n"
        "right: scores.masked_fill(mask[:n, :n], -inf) masks all 4 heads (the mask broadcasts over B and H)"
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
        k, v = (t.repeat_interleave(self.group, dim=1) for t in (k, v))  # (B, H, n, dh): head h uses h // group
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores[:, :self.group] = scores[:, :self.group].masked_fill(self.mask[:n, :n], float("-inf"))  # BUG
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
