"""The lesson's `CausalMHA` with grouped-query attention: `kv_heads` key/value heads shared by the query heads.

"Multi-query and grouped-query attention share keys and values among several query heads": W_k and W_v project to
kv_heads * dh features instead of d_out, and each key/value head serves group = nheads // kv_heads query heads,
query head h using key/value head h // group (`repeat_interleave`).  kv_heads = 1 is multi-query attention,
kv_heads = nheads the lesson's layer.  Kept line for line in the lesson's style: the `gqa_` and `mqa_` mutants in
`mutants/` are copies of this class with one `# BUG:` line each, which is why it is named `CausalMHA` as the lesson's
class is (`GroupedMHA` is the same class).
"""
import torch
import torch.nn as nn


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
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)

def gqa_forward(x, nheads, wq, wk, wv, wo, bq=None, bk=None, bv=None, bo=None):  # pragma: no mutate block - unchecked
    """The grouped forward from explicit weights in nn.Linear convention; kv_heads is W_k's height over the head
    width.  Used by tests to tie reference.grouped (through numpy_ref) to torch (evaluation mode, no dropout)."""
    B, n, _ = x.shape
    d_out = wq.shape[0]
    dh = d_out // nheads
    kv = wk.shape[0] // dh
    lin = torch.nn.functional.linear
    q = lin(x, wq, bq).view(B, n, nheads, dh).transpose(1, 2)
    k = lin(x, wk, bk).view(B, n, kv, dh).transpose(1, 2).repeat_interleave(nheads // kv, dim=1)
    v = lin(x, wv, bv).view(B, n, kv, dh).transpose(1, 2).repeat_interleave(nheads // kv, dim=1)
    scores = q @ k.transpose(2, 3) / dh ** 0.5
    future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), 1)
    w = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d_out)
    return lin(ctx, wo, bo)


GroupedMHA = CausalMHA  # what it is, for tests and targets (reference/grouped_mha.py:GroupedMHA)
