"""Correct: the lesson's own `CausalMHA` (LM3-T5), copied verbatim from the lesson text.

Style: the lesson's compact version. A single width `d` (d_in == d_out), three bias-free nn.Linear made in a
generator, `out` with a bias, a bool triu mask buffer, a `split` lambda doing view(B, n, H, dh).transpose(1, 2),
merge with transpose(1, 2).contiguous().view(B, n, d). No dropout and no Q/K/V bias option; divisibility is an
`assert`. The lesson's demo loop is kept under `__main__` so that importing the module has no side effects.
"""
import torch
import torch.nn as nn


class CausalMHA(nn.Module):
    def __init__(self, d, nheads, context_length):
        super().__init__()
        assert d % nheads == 0
        self.h, self.dh = nheads, d // nheads
        self.q, self.k, self.v = (nn.Linear(d, d, bias=False) for _ in range(3))
        self.out = nn.Linear(d, d)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, d = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)  # (B, H, n, dh)
        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(2, 3) / self.dh ** 0.5  # (B, H, n, n)
        scores = scores.masked_fill(self.mask[:n, :n], float("-inf"))
        w = torch.softmax(scores, dim=-1)
        ctx = (w @ v).transpose(1, 2).contiguous().view(B, n, d)  # merge the heads
        return self.out(ctx)


TARGET = "CausalMHA"
EXPECT = ()


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(2, 3, 8)
    for H in (1, 2, 4):
        m = CausalMHA(8, H, context_length=16)
        print(H, tuple(m(x).shape), sum(p.numel() for p in m.parameters()))  # same shape and 264 parameters every time
