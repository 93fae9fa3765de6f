"""The reference `CausalMHA` from lesson LM3-T5, generalised to d_in != d_out, Q/K/V bias and dropout.

The forward pass is kept line for line as the lesson teaches it (split with `view(B, n, H, dh).transpose(1, 2)`,
merge with `transpose(1, 2).contiguous().view(B, n, d)`), because the mutants in `mutants/` are copies of this
class with one deliberate bug each and their diffs against it must stay readable.
"""
import torch
import torch.nn as nn


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

    def forward(self, x):
        B, n, _ = x.shape
        d = self.h * self.dh
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        w = self.dropout(w)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)


def mha_forward(x, nheads, wq, wk, wv, wo, bq=None, bk=None, bv=None, bo=None):  # pragma: no mutate block - unchecked
    """The reference forward from explicit weights in nn.Linear convention (weight shape (out, in)).

    Used by tests to tie the numpy reference to the torch module; dropout is not part of it (evaluation mode).
    """
    B, n, _ = x.shape
    d_out = wq.shape[0]
    dh = d_out // nheads
    lin = torch.nn.functional.linear
    split = lambda t: t.view(B, n, nheads, dh).transpose(1, 2)
    q, k, v = split(lin(x, wq, bq)), split(lin(x, wk, bk)), split(lin(x, wv, bv))
    scores = q @ k.transpose(2, 3) / dh ** 0.5
    future = torch.triu(torch.ones(n, n, dtype=torch.bool, device=x.device), 1)
    w = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d_out)
    return lin(ctx, wo, bo)
