"""Correct: a layer with a short vocabulary of its own and a default number of heads: `embeddings_size`,
`head=8`, `block=32`, and a divisibility guard of its own.

Style: one fused `qkv` Linear split with chunk, `proj` out, a float tril buffer compared with 0 in masked_fill.
Left at `head=8`, the guard rightly refuses d=6 (issue 28: mha-check once reported "failed for d=6, heads=3" and
named divisibility-inverted); read by its words, `head` is the number of heads and the layer passes.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "Attention"
EXPECT = ()


class Attention(nn.Module):
    def __init__(self, embeddings_size, head=8, block=32):
        super().__init__()
        assert embeddings_size % head == 0, f"{embeddings_size} is not divisible by {head} heads"
        self.head = head
        self.qkv = nn.Linear(embeddings_size, 3 * embeddings_size)
        self.proj = nn.Linear(embeddings_size, embeddings_size)
        self.register_buffer("tril", torch.tril(torch.ones(block, block)))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.reshape(B, T, self.head, C // self.head).permute(0, 2, 1, 3) for t in (q, k, v))
        wei = (q @ k.transpose(-2, -1)) * (C // self.head) ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        out = (wei @ v).permute(0, 2, 1, 3).reshape(B, T, C)
        return self.proj(out)
