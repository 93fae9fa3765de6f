"""Buggy (student style, scale-by-sqrt-d): a multi-query layer with one shared key/value projection,
`kv_proj = nn.Linear(d_model, 2 * d_head)` split into K and V and broadcast over the query heads, whose scores are
divided by sqrt(D), the model width, instead of sqrt(d_head).  No constructor parameter says it is multi-query (its
K/V shapes do), and its projections have no biases, the Llama family's way, which out-proj-bias lets pass as "does
not apply".  A student's trial: trace marked the output projection built without its bias all the same
(out-proj-no-bias at its line), a mistake the report did not name and whose check passed.

Style: `q_proj` / `kv_proj` / `o_proj`, a boolean `causal` buffer kept (tril), `math.sqrt`.
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiQueryAttention(nn.Module):
    """Multi-query attention: many query heads, one shared key/value head."""

    def __init__(self, d_model, n_heads, max_len=1024):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.kv_proj = nn.Linear(d_model, 2 * self.d_head, bias=False)  # one K and one V for all heads
        self.o_proj = nn.Linear(d_model, d_model, bias=False)
        self.register_buffer("causal", torch.ones(max_len, max_len, dtype=torch.bool).tril())

    def forward(self, x):
        B, T, D = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.d_head).transpose(1, 2)
        k, v = self.kv_proj(x).split(self.d_head, dim=-1)
        k = k.unsqueeze(1)  # (B, 1, T, dh) broadcasts over the heads
        v = v.unsqueeze(1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D)  # BUG: the model width, not the head width
        att = att.masked_fill(~self.causal[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, D)
        return self.o_proj(y)


TARGET = "MultiQueryAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "scale-by-sqrt-d"
LINE = 35
