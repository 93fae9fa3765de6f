"""Buggy (student style, weights-under-no-grad): the keys projected and then `.detach()`ed "since the keys are only
compared": the output is exact, but W_k gets no gradient (nor the input through the keys).  A student's trial: the
catalogued mistake was found for torch.no_grad() only, so this layer was named nothing and trace marked no line.
From the numbers, not the no_grad mutant's (W_q keeps its gradient): named weights-under-no-grad told by the line
(the key projection's output detached), where parameters-used finds W_k alone without a gradient.

Style: `W_q` / `W_k` / `W_v` / `W_o` with biases, `d_k`, a boolean `mask` buffer made with triu.
"""
import math

import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, context_length):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1).bool())

    def forward(self, x):
        B, T, _ = x.shape
        q = self.W_q(x)
        k = self.W_k(x).detach()
        v = self.W_v(x)
        q = q.view(B, T, self.num_heads, self.d_k).transpose(1, 2)
        k = k.view(B, T, self.num_heads, self.d_k).transpose(1, 2)
        v = v.view(B, T, self.num_heads, self.d_k).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)
        scores = scores.masked_fill(self.mask[:T, :T], float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        out = (attn @ v).transpose(1, 2).contiguous().view(B, T, -1)
        return self.W_o(out)


TARGET = "MultiHeadAttention"
EXPECT = ("gradient-match", "parameters-used")
DIAGNOSIS = "weights-under-no-grad"
LINE = 30
