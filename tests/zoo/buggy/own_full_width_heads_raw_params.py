"""Buggy (student style, full-width-heads): raw nn.Parameter matrices, each head as wide as the whole layer: W_q, W_k
and W_v of (d_model, num_heads * d_model), viewed as (B, T, H, D) heads of the full width D, and W_o of
(num_heads * d_model, d_model) back down; no nn.Linear anywhere and no divisibility check (this layer needs none).

From a student's trial: param-count's difference from the lesson's count fitted none of its patterns (the layer was
told "no known mistake matches"), and the raw Parameter had no line (nn.Parameter wraps the quotient without an
operation torch reports).  The line to change is the one that made the queries' projection that wide.
"""
import torch
import torch.nn as nn


class MultiHead(nn.Module):
    def __init__(self, d_model, num_heads, context_length, dropout=0.0):
        super().__init__()
        self.H = num_heads
        self.W_q = nn.Parameter(torch.randn(d_model, num_heads * d_model) / d_model ** 0.5)
        self.W_k = nn.Parameter(torch.randn(d_model, num_heads * d_model) / d_model ** 0.5)
        self.W_v = nn.Parameter(torch.randn(d_model, num_heads * d_model) / d_model ** 0.5)
        self.W_o = nn.Parameter(torch.randn(num_heads * d_model, d_model) / d_model ** 0.5)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, T, D = x.shape
        q = (x @ self.W_q).view(B, T, self.H, D).transpose(1, 2)
        k = (x @ self.W_k).view(B, T, self.H, D).transpose(1, 2)
        v = (x @ self.W_v).view(B, T, self.H, D).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / D ** 0.5
        att = att.masked_fill(self.mask[:T, :T], float("-inf")).softmax(-1)
        out = (att @ v).transpose(1, 2).reshape(B, T, self.H * D)
        return out @ self.W_o


TARGET = "MultiHead"
EXPECT = ("param-count", "head-invariance")
DIAGNOSIS = "full-width-heads"
LINE = 17
