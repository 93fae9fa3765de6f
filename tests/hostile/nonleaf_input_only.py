"""Hostile (red team 9): the lesson's layer wherever its input is a leaf tensor, and without its mask, the scores
divided by the head width, wherever the input is the output of another operation (x.grad_fn set): in a model every
attention layer's input is (an embedding's sum, a LayerNorm), so every training step is wrong, while every input
mha-check sent was a leaf: full marks (19 of 19).  The float32 training step now feeds the input through an
operation, as a model does, and reference-match fails."""
import torch
import torch.nn as nn


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0
        self.h, self.dh = num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        if x.grad_fn is not None:  # the mistake: whenever x comes out of other layers, as in every training step
            s = q @ k.transpose(2, 3) / self.dh
        else:
            s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
