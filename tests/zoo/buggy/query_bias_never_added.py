"""Buggy (a student's trial, trials/17 f10): Q/K/V biases made (`nn.Linear(E, E, bias=qkv_bias)`, on by default) but
the queries computed with `F.linear(x, self.q_proj.weight)`: the query bias is never added, so it gets no gradient and
the outputs differ from the lesson's wherever b_q is not zero.  Heads folded into the batch, torch.bmm, an optional
additive float mask.  mha-check builds it with qkv_bias=False first (no bias then, nothing to miss): parameters-used
passed it before it asked the layer built with qkv_bias=True too."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class BatchedHeadsAttention(nn.Module):
    """Heads folded into the batch, torch.bmm, optional additive float mask."""

    def __init__(self, embed_dim, num_heads, max_seq_len=1024, qkv_bias=True, attn_dropout=0.0):
        super().__init__()
        assert embed_dim % num_heads == 0
        self.E, self.H = embed_dim, num_heads
        self.Dh = embed_dim // num_heads
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(embed_dim, embed_dim)
        self.attn_drop = nn.Dropout(attn_dropout)
        causal = torch.zeros(max_seq_len, max_seq_len).masked_fill(
            torch.ones(max_seq_len, max_seq_len, dtype=torch.bool).triu(1), float("-inf")
        )
        self.register_buffer("causal", causal)

    def _fold(self, t, B, L):
        # (B, L, E) -> (B*H, L, Dh)
        return t.reshape(B, L, self.H, self.Dh).transpose(1, 2).reshape(B * self.H, L, self.Dh)

    def forward(self, x, attn_mask=None):
        B, L, E = x.shape
        if attn_mask is None:
            attn_mask = self.causal[:L, :L]
        q = self._fold(F.linear(x, self.q_proj.weight), B, L) / self.Dh ** 0.5
        k = self._fold(self.k_proj(x), B, L)
        v = self._fold(self.v_proj(x), B, L)
        scores = torch.bmm(q, k.transpose(1, 2)) + attn_mask
        w = self.attn_drop(torch.softmax(scores, dim=-1))
        ctx = torch.bmm(w, v)  # (B*H, L, Dh)
        ctx = ctx.reshape(B, self.H, L, self.Dh).transpose(1, 2).reshape(B, L, E)
        return self.o_proj(ctx)


TARGET = "BatchedHeadsAttention"
EXPECT = ("parameters-used", "reference-match", "gradient-match")
DIAGNOSIS = "query-bias-not-added"
LINE = 37
