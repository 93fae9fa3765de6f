"""Buggy (student style, nanoGPT's keyword names): the causal mask kept as nn.Parameter(..., requires_grad=False)
instead of a registered buffer.

It moves with the module and is in the state_dict, so the math is right, but model.parameters() yields it: the
lesson's parameter count, sum(p.numel() for p in model.parameters()), gains block_size² entries, and an optimizer is
handed it.  mask-buffer said "a mask stored as a trainable nn.Parameter" of a parameter with requires_grad=False
(student10's trial); it now says what such a parameter does.  No catalogued mistake is this one.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout=0.1, bias=True):
        super().__init__()
        assert n_embd % n_head == 0
        self.n_head = n_head
        self.head_size = n_embd // n_head
        self.dropout = dropout
        self.query = nn.Linear(n_embd, n_embd, bias=bias)
        self.key = nn.Linear(n_embd, n_embd, bias=bias)
        self.value = nn.Linear(n_embd, n_embd, bias=bias)
        self.proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.causal_mask = nn.Parameter(
            torch.tril(torch.ones(block_size, block_size)).bool(), requires_grad=False
        )

    def forward(self, x):
        B, T, C = x.shape
        q = self.query(x).view(B, T, self.n_head, self.head_size).transpose(1, 2)
        k = self.key(x).view(B, T, self.n_head, self.head_size).transpose(1, 2)
        v = self.value(x).view(B, T, self.n_head, self.head_size).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / self.head_size ** 0.5
        att = att.masked_fill(~self.causal_mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        att = F.dropout(att, p=self.dropout, training=self.training)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(y)


TARGET = "Attention"
EXPECT = ("mask-buffer",)
DIAGNOSIS = None  # no mutant keeps the mask as a parameter; mask-buffer says what is wrong and its fix fits
MUST_PASS = ("reference-match", "gradient-match", "causal-leakage", "eval-determinism", "param-count")
