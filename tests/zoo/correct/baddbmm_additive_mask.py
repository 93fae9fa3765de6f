"""Correct: scores made by one torch.baddbmm, which adds the causal mask and scales in the same call.

Style: a lab notebook's layer (found by a student trial in a notebook): separate W_query / W_key / W_value, heads
folded into the batch, a registered float mask of 0 and -inf (`full(-inf).triu(1)`) expanded to (B·H, n, n) as
baddbmm's `input`, the scale as its `alpha=dh ** -0.5`, then bmm with the values. The trace must read the scale
(alpha) and the mask (input) inside the product, not mark no-scaling and no-mask.
"""
import torch
import torch.nn as nn


class BaddAttn(nn.Module):
    def __init__(self, d_in, d_out, num_heads, context_length):
        super().__init__()
        assert d_out % num_heads == 0
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, d_out, bias=False)
        self.W_value = nn.Linear(d_in, d_out, bias=False)
        self.out_proj = nn.Linear(d_out, d_out)
        neg = torch.full((context_length, context_length), float("-inf")).triu(1)
        self.register_buffer("neg_mask", neg)

    def forward(self, x):
        b, n, _ = x.shape
        H, dh = self.num_heads, self.head_dim

        def heads(t):
            return t.view(b, n, H, dh).transpose(1, 2).reshape(b * H, n, dh)

        q, k, v = heads(self.W_query(x)), heads(self.W_key(x)), heads(self.W_value(x))
        bias = self.neg_mask[:n, :n].expand(b * H, n, n)
        scores = torch.baddbmm(bias, q, k.transpose(1, 2), beta=1.0, alpha=dh ** -0.5)
        w = torch.softmax(scores, dim=-1)
        ctx = torch.bmm(w, v).view(b, H, n, dh).transpose(1, 2).reshape(b, n, H * dh)
        return self.out_proj(ctx)


TARGET = "BaddAttn"
