"""Grouped-query attention whose key/value projections are widened to d_out feature by feature, before the split."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="gqa-expand-wrong-axis",
    task=("A grouped-query layer gives other outputs than the reference whenever the key/value heads are fewer than "
          "the query heads, multi-query included; with as many key/value heads as query heads it is right."),
    topic="sharing key/value heads",
    title=("Key/value heads expanded along the feature axis: repeat_interleave(group, dim=-1) on the flat projections "
           "repeats each feature, not each head"),
    lesson=("Grouped-query attention repeats whole key/value heads: after the split, (B, KV, n, dh) becomes "
            "(B, H, n, dh) with repeat_interleave(group, dim=1). On the flat (B, n, KV·dh) projections the heads are "
            "blocks of dh features, and repeat_interleave(group, dim=-1) repeats every single feature instead."),
    killed_by=("reference-match", "gradient-match"),
    symptom=("The keys and values have the right width d_out, so the lesson's split works unchanged and nothing "
             "crashes, but each query head gets a few features of a key/value head, each written group times (with "
             "dh = 2 and group = 2, head 0's keys are [a0, a0] instead of [a0, a1]). Multi-query is wrong too; "
             "only as many key/value heads as query heads (group = 1) is right."),
    remedy=("Split the keys and values into their key/value heads first, then repeat each whole head "
            "(repeat_interleave along the heads axis), never single features."),
    fix="k, v = (t.repeat_interleave(self.group, dim=1) for t in (k, v))  # (B, H, n, dh): head h uses h // group",
    trace=("kv-features-repeated",),
    variant={"kv_expand": "features"},
    example=(
        "H = 4, KV = 2, dh = 2, group = 2: self.k(x) is (B, n, 4) = [a0 a1 | b0 b1] (key/value heads a and b)\n"
        "right: view (B, n, 2, 2) -> heads [a, b]; repeat_interleave(2, dim=1) -> [a, a, b, b]\n"
        "wrong: repeat_interleave(2, dim=-1) -> (B, n, 8) = [a0 a0 a1 a1 b0 b0 b1 b1]; view (B, n, 4, 2) -> heads "
        "[a0 a0], [a1 a1], [b0 b0], [b1 b1]\n"
        "multi-query (KV = 1, H = 3): [a0 a1] -> [a0 a0 a0 a1 a1 a1]: wrong too; only KV = H leaves it unchanged"
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
        k = self.k(x).repeat_interleave(self.group, dim=-1).view(B, n, self.h, self.dh).transpose(1, 2)  # BUG: features
        v = self.v(x).repeat_interleave(self.group, dim=-1).view(B, n, self.h, self.dh).transpose(1, 2)  # BUG: features
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
