"""Buggy (student style, softmax-wrong-axis): every product a torch.bmm, the weights raw nn.Parameter matrices given
a batch axis with `.unsqueeze(0).expand(B, -1, -1)`, the heads folded into the batch (B·H, n, dh), and the softmax
taken over dim=1 of the (B·H, n, n) scores: the queries, not the keys.  A student's trial: the report named the
softmax at its line, but trace read no projection in `torch.bmm(x, W)` (W three-dimensional, so not taken for a
weight) and marked the scores never scaled and no output projection, both there.

Style: `W_q`/`W_k`/`W_v`/`W_o` and `b_o` as raw parameters, an additive `neg` buffer of -inf above the diagonal.
"""
import torch
import torch.nn as nn


class BmmAttention(nn.Module):
    """Everything as 3-D batched matmuls: heads folded into the batch dimension."""

    def __init__(self, d_in, d_out, context_length, num_heads, dropout=0.0):
        super().__init__()
        assert d_out % num_heads == 0
        self.h = num_heads
        self.dh = d_out // num_heads
        self.W_q = nn.Parameter(torch.randn(d_in, d_out) / d_in ** 0.5)
        self.W_k = nn.Parameter(torch.randn(d_in, d_out) / d_in ** 0.5)
        self.W_v = nn.Parameter(torch.randn(d_in, d_out) / d_in ** 0.5)
        self.W_o = nn.Parameter(torch.randn(d_out, d_out) / d_out ** 0.5)
        self.b_o = nn.Parameter(torch.zeros(d_out))
        self.register_buffer("neg", torch.full((context_length, context_length), float("-inf")).triu(1))

    def _heads(self, t, B, n):
        # (B, n, d) -> (B*H, n, dh)
        return t.reshape(B, n, self.h, self.dh).permute(0, 2, 1, 3).reshape(B * self.h, n, self.dh)

    def forward(self, x):
        B, n, d_in = x.shape
        W = self.W_q.unsqueeze(0).expand(B, -1, -1)
        q = self._heads(torch.bmm(x, W), B, n)
        k = self._heads(torch.bmm(x, self.W_k.unsqueeze(0).expand(B, -1, -1)), B, n)
        v = self._heads(torch.bmm(x, self.W_v.unsqueeze(0).expand(B, -1, -1)), B, n)
        s = torch.bmm(q, k.transpose(1, 2)) / self.dh ** 0.5 + self.neg[:n, :n]
        p = torch.softmax(s, dim=1)  # BUG: over the queries
        ctx = torch.bmm(p, v)  # (B*H, n, dh)
        ctx = ctx.reshape(B, self.h, n, self.dh).permute(0, 2, 1, 3).reshape(B, n, self.h * self.dh)
        return torch.bmm(ctx, self.W_o.unsqueeze(0).expand(B, -1, -1)) + self.b_o


TARGET = "BmmAttention"
EXPECT = ("causal-leakage", "reference-match", "gradient-match")
DIAGNOSIS = "softmax-wrong-axis"
LINE = 39
