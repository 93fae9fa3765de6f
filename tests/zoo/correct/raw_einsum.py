"""Correct: raw nn.Parameter weight matrices used as `x @ W` through torch.einsum.

Style: "math first" code from someone who thinks of a projection as X W with W of shape (d_in, d_out), not as an
nn.Linear. W_q, W_k, W_v, W_o are square (d_model, d_model) parameters (so their orientation cannot be read off
the shapes), the output bias b_o is a separate parameter, no Q/K/V biases. Heads are split with `unflatten` and
never transposed: the einsum subscripts do the bookkeeping. A bool tril buffer (True = allowed) is inverted with
`~` when filling. Divisibility is checked with a ValueError.
"""
import math

import torch
import torch.nn as nn


class EinsumCausalAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, block_size: int, dropout: float = 0.0):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model ({d_model}) must be a multiple of n_heads ({n_heads})")
        self.n_heads = n_heads
        self.d_head = d_model // n_heads
        self.scale = 1.0 / math.sqrt(self.d_head)

        self.W_q = nn.Parameter(torch.empty(d_model, d_model))
        self.W_k = nn.Parameter(torch.empty(d_model, d_model))
        self.W_v = nn.Parameter(torch.empty(d_model, d_model))
        self.W_o = nn.Parameter(torch.empty(d_model, d_model))
        self.b_o = nn.Parameter(torch.zeros(d_model))
        for W in (self.W_q, self.W_k, self.W_v, self.W_o):
            nn.init.xavier_uniform_(W)

        self.attn_drop = nn.Dropout(dropout)
        self.register_buffer("causal", torch.tril(torch.ones(block_size, block_size, dtype=torch.bool)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[1]
        heads = (self.n_heads, self.d_head)
        q = torch.einsum("btd,de->bte", x, self.W_q).unflatten(-1, heads)  # (B, T, H, Dh)
        k = torch.einsum("btd,de->bte", x, self.W_k).unflatten(-1, heads)
        v = torch.einsum("btd,de->bte", x, self.W_v).unflatten(-1, heads)

        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * self.scale  # (B, H, T, T)
        scores = scores.masked_fill(~self.causal[:T, :T], float("-inf"))
        attn = self.attn_drop(scores.softmax(dim=-1))

        ctx = torch.einsum("bhqk,bkhd->bqhd", attn, v).flatten(2)  # (B, T, H*Dh)
        return torch.einsum("bte,ef->btf", ctx, self.W_o) + self.b_o


TARGET = "EinsumCausalAttention"
EXPECT = ()
