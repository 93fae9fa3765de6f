"""Per-head projections kept in one ModuleList per role (q_heads, k_heads, v_heads), each head a Linear(d, dh);
the heads are computed in a Python loop, concatenated and projected: an unusual layout, and a correct layer."""
import math

import torch
import torch.nn as nn


class LoopedHeads(nn.Module):
    def __init__(self, embed_dim, num_heads, max_len):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError("embed_dim must be divisible by num_heads")
        self.head_dim = embed_dim // num_heads
        self.q_heads = nn.ModuleList(nn.Linear(embed_dim, self.head_dim, bias=False) for _ in range(num_heads))
        self.k_heads = nn.ModuleList(nn.Linear(embed_dim, self.head_dim, bias=False) for _ in range(num_heads))
        self.v_heads = nn.ModuleList(nn.Linear(embed_dim, self.head_dim, bias=False) for _ in range(num_heads))
        self.out = nn.Linear(embed_dim, embed_dim)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def forward(self, x):
        n = x.shape[1]
        outputs = []
        for q_lin, k_lin, v_lin in zip(self.q_heads, self.k_heads, self.v_heads):
            q, k, v = q_lin(x), k_lin(x), v_lin(x)
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
            scores = scores.masked_fill(~self.causal[:n, :n], float("-inf"))
            outputs.append(torch.softmax(scores, dim=-1) @ v)
        return self.out(torch.cat(outputs, dim=-1))


TARGET = "LoopedHeads"
EXPECT = ()
