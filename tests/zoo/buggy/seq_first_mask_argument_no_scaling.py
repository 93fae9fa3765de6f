"""Buggy (student style, no-scaling): a SEQUENCE-FIRST layer, (T, B, E) in and out, whose causal mask is a
REQUIRED forward argument, `forward(x, mask)` with mask a (T, T) bool tensor, True = masked, and whose scores are
never divided by sqrt(head_dim). Called the usual way, (B, n, d), every call raises (the (n, n) mask cannot fit
scores over the batch axis); only sequence first does it run. Its mistake must be found there, not turned into a
failure to run.

Style: one fused in_proj Linear(E, 3E) chunked [Q; K; V], heads split with view(T, B * H, hd).transpose(0, 1),
bmm, masked_fill with -inf, out_proj.
"""
import torch
import torch.nn as nn


class SeqFirstNoScale(nn.Module):
    def __init__(self, embed_dim, num_heads):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.h, self.hd = num_heads, embed_dim // num_heads
        self.in_proj = nn.Linear(embed_dim, 3 * embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)

    def forward(self, x, mask):
        T, B, E = x.shape
        q, k, v = (t.contiguous().view(T, B * self.h, self.hd).transpose(0, 1)
                   for t in self.in_proj(x).chunk(3, dim=-1))
        scores = torch.bmm(q, k.transpose(1, 2))
        scores = scores.masked_fill(mask, float("-inf"))
        out = torch.bmm(scores.softmax(dim=-1), v).transpose(0, 1).reshape(T, B, E)
        return self.out_proj(out)


TARGET = "SeqFirstNoScale"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "no-scaling"
