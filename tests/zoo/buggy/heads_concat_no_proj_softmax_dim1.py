"""Buggy (two mistakes at once, softmax-wrong-axis and no-output-projection): each head normalises its scores over
dim=1 of (B, T, T), the queries, instead of the keys, and the heads are concatenated and returned as they are,
nothing after.  Read without an output projection (W_o the identity), the softmax's mistake reproduces the layer, so
the checks of the math judge it (reference-match, gradient-match and causal-leakage fail, view-order passes) and
both mistakes are named, each at its line: before, with no output projection no reading was certain, every weight
check could not tell, and only the missing projection was named (issue 28 item 3).

Style: "Let's build GPT" before its `self.proj` is added (the CS224n / early-course layer): a class Head with
key / query / value nn.Linear(n_embd, head_size, bias=False), a `tril` buffer and `wei`, and a MultiHeadAttention
holding nn.ModuleList([Head(...) for _ in range(n_head)]) whose forward is torch.cat([h(x) for h in self.heads], -1).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size, dropout):
        super().__init__()
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        k = self.key(x)  # (B, T, hs)
        q = self.query(x)  # (B, T, hs)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B, T, T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=1)  # over the queries (the rows), not the keys
        wei = self.dropout(wei)
        v = self.value(x)  # (B, T, hs)
        return wei @ v


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.0):
        super().__init__()
        assert n_embd % n_head == 0
        head_size = n_embd // n_head
        self.heads = nn.ModuleList([Head(n_embd, head_size, block_size, dropout) for _ in range(n_head)])

    def forward(self, x):
        return torch.cat([h(x) for h in self.heads], dim=-1)  # the heads side by side, never mixed


TARGET = "MultiHeadAttention"
EXPECT = ("reference-match", "gradient-match", "causal-leakage", "param-count", "out-proj-bias")
DIAGNOSIS = ("softmax-wrong-axis", "no-output-projection")  # both named, each at its line
LINES = (32, 46)  # the softmax, the concatenation returned
MUST_PASS = ("view-order", "head-invariance", "divisibility")  # judged under the reading without W_o, and right
