"""Key/value heads shared with .expand, the multi-query idiom: one head broadcasts, two or more raise."""
import torch
import torch.nn as nn

from mutants._info import MutantInfo

INFO = MutantInfo(
    id="mqa-expand-not-repeat",
    task=("A layer that takes a number of key/value heads works with one key/value head (multi-query) and with as "
          "many as the query heads, and raises with 2 key/value heads for 4 query heads."),
    topic="sharing key/value heads",
    title=("Key/value heads shared with .expand, which only broadcasts a single head: right for multi-query, an "
           "error for grouped-query"),
    lesson=("Multi-query attention has one key/value head: (B, 1, n, dh) broadcasts to every query head, and "
            ".expand(B, H, n, dh) does that without copying. Grouped-query attention has several, each serving a "
            "group of query heads: only repeat_interleave(group, dim=1) (or Llama's repeat_kv) makes (B, H, n, dh) "
            "from (B, KV, n, dh); .expand can only stretch an axis of size 1."),
    killed_by=("output-shape",),
    symptom=("With one key/value head (or as many as the heads) the output is right, so a multi-query test passes; "
             "with 2 key/value heads for 4 query heads forward raises 'The expanded size of the tensor (4) must "
             "match the existing size (2) at non-singleton dimension 1'."),
    remedy=("Repeat each key/value head for its group of query heads (repeat_interleave along the heads axis); "
            "expand only broadcasts a single head."),
    fix="k, v = (t.repeat_interleave(self.group, dim=1) for t in (k, v))  # (B, H, n, dh): head h uses h // group",
    trace=("kv-heads-expanded",),
    example=(
        "multi-query, H = 3, KV = 1: k (B, 1, n, dh).expand(B, 3, n, dh) -> [k0, k0, k0]: right, and no copy\n"
        "grouped, H = 4, KV = 2: k (B, 2, n, dh).expand(B, 4, n, dh) raises: axis 1 has size 2, not 1\n"
        "right for both: k.repeat_interleave(H // KV, dim=1) -> [k0, k0, k0] and [k0, k0, k1, k1]"
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
        k, v = (t.expand(B, self.h, n, self.dh) for t in (k, v))  # BUG: broadcasts one K/V head only (multi-query)
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)
