"""Correct: a layer built from a @dataclass config whose fields default to None, one fused projection split into
[Q; K; V] by rows, a registered lower-triangular mask.

Stands for a real-code pattern (a small character-level language-model script, removed from tests/realzoo/ with the
provenance clean-up): the config is a dataclass whose block_size and vocabulary size default to None (filled in
later by the training script), so a checker that builds it with its defaults gets None for the context length; the
layer reads n_embd, n_head and block_size from it.  Written here from that description, in its own names.
"""
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class LayerSettings:
    block_size: int = None  # set by the caller from the data
    vocab_size: int = None
    n_layer: int = 4
    n_embd: int = 64
    n_head: int = 4


class FusedCausalAttention(nn.Module):
    def __init__(self, settings: LayerSettings):
        super().__init__()
        assert settings.n_embd % settings.n_head == 0
        self.qkv = nn.Linear(settings.n_embd, 3 * settings.n_embd)
        self.proj = nn.Linear(settings.n_embd, settings.n_embd)
        n = settings.block_size
        self.register_buffer("allowed", torch.tril(torch.ones(n, n)).view(1, 1, n, n))
        self.heads = settings.n_head
        self.width = settings.n_embd

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(self.width, dim=2)
        q = q.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        k = k.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        v = v.view(B, T, self.heads, C // self.heads).transpose(1, 2)
        w = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        w = F.softmax(w.masked_fill(self.allowed[:, :, :T, :T] == 0, float("-inf")), dim=-1)
        y = (w @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


TARGET = "FusedCausalAttention"
EXPECT = ()
