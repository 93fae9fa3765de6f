"""Correct: a ModuleList of single heads, each calling scaled_dot_product_attention with a boolean "allowed" mask
(True = may attend, tril), concatenated and projected.

Style: a student's trial of mha-check (issue 28): `OneHead(emb, hs)` with q/k/v Linear without biases, the mask made
in forward on the input's device, SDPA's own scale 1/sqrt(hs). The trace judged the first head's SDPA by the product
of every SDPA's scale in the forward (1/2 times 1/2 for two heads of width 4) and marked it "divided by dh", on a
class the report passes; each fused attention is now judged by its own scale.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class OneHead(nn.Module):
    def __init__(self, emb, hs):
        super().__init__()
        self.q = nn.Linear(emb, hs, bias=False)
        self.k = nn.Linear(emb, hs, bias=False)
        self.v = nn.Linear(emb, hs, bias=False)

    def forward(self, x):
        T = x.shape[1]
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        return F.scaled_dot_product_attention(self.q(x), self.k(x), self.v(x), attn_mask=allowed)


class HeadsLoop(nn.Module):
    def __init__(self, emb, n_head, block):
        super().__init__()
        assert emb % n_head == 0
        self.heads = nn.ModuleList(OneHead(emb, emb // n_head) for _ in range(n_head))
        self.proj = nn.Linear(emb, emb)

    def forward(self, x):
        return self.proj(torch.cat([h(x) for h in self.heads], dim=-1))


TARGET = "HeadsLoop"
