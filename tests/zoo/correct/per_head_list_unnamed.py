"""Correct: Karpathy's "Let's build GPT" heads (an nn.ModuleList of `Head` modules, each with three
nn.Linear(n_embd, head_size, bias=False)) whose projections are named `lin1`, `lin2`, `lin3`: names that say no role
(issue 28 item 1).

Style: the lecture's gpt.py, key declared first as in the lecture (lin1 is the key, lin2 the query, lin3 the value),
a `tril` buffer per head, the heads' outputs concatenated in head order and mixed by `mix = nn.Linear(n_embd,
n_embd)`, scaled by the head size (`k.shape[-1] ** -0.5`), divisibility asserted.  No name says which projection is
which: the layer is read in every order of the three per head (declared first), and the one in which the lesson's
reference reproduces its output is its mapping.  Before, no reading was offered and every weight check was
cannot-tell.
"""
import torch
import torch.nn as nn
from torch.nn import functional as F


class Head(nn.Module):
    def __init__(self, n_embd, head_size, block_size):
        super().__init__()
        self.lin1 = nn.Linear(n_embd, head_size, bias=False)
        self.lin2 = nn.Linear(n_embd, head_size, bias=False)
        self.lin3 = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        k = self.lin1(x)
        q = self.lin2(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        return wei @ self.lin3(x)


class MultiHeadAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0, "n_embd must be divisible by n_head"
        head_size = n_embd // n_head
        self.heads = nn.ModuleList([Head(n_embd, head_size, block_size) for _ in range(n_head)])
        self.mix = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        return self.mix(torch.cat([h(x) for h in self.heads], dim=-1))


TARGET = "MultiHeadAttention"
EXPECT = ()
