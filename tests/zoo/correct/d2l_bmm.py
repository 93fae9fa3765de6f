"""Correct: Dive-into-Deep-Learning style with transpose_qkv / transpose_output helpers and torch.bmm.

Style: d2l.ai chapter 11. `MultiHeadAttention(num_hiddens, num_heads, dropout, bias=False)` with W_q / W_k / W_v /
W_o, module-level helper functions folding heads into the batch axis ((B*H, T, dh) via reshape + permute),
torch.bmm for scores and values, and a `masked_softmax` that fills with -1e6 like d2l does (underflows to
exactly 0 in float64). Changes from d2l so that it is the lesson's function: a causal mask (built in forward from
two aranges on X.device) instead of valid_lens, W_o always has a bias, plain Linear instead of LazyLinear, and a
divisibility assert. No context-length argument.
"""
import math

import torch
from torch import nn


def masked_softmax(X, mask):
    """Softmax over the last axis with masked (True) positions set to a large negative value."""
    X = X.masked_fill(mask, -1e6)
    return nn.functional.softmax(X, dim=-1)


def transpose_qkv(X, num_heads):
    """Transposition for parallel computation of multiple attention heads."""
    # Shape of input X: (batch_size, no. of queries or key-value pairs, num_hiddens).
    # Shape of output X: (batch_size, no. of queries or key-value pairs, num_heads, num_hiddens / num_heads)
    X = X.reshape(X.shape[0], X.shape[1], num_heads, -1)
    # Shape of output X: (batch_size, num_heads, no. of queries or key-value pairs, num_hiddens / num_heads)
    X = X.permute(0, 2, 1, 3)
    # Shape of output: (batch_size * num_heads, no. of queries or key-value pairs, num_hiddens / num_heads)
    return X.reshape(-1, X.shape[2], X.shape[3])


def transpose_output(X, num_heads):
    """Reverse the operation of transpose_qkv."""
    X = X.reshape(-1, num_heads, X.shape[1], X.shape[2])
    X = X.permute(0, 2, 1, 3)
    return X.reshape(X.shape[0], X.shape[1], -1)


class MultiHeadAttention(nn.Module):
    """Multi-head attention."""

    def __init__(self, num_hiddens, num_heads, dropout, bias=False, **kwargs):
        super().__init__(**kwargs)
        assert num_hiddens % num_heads == 0
        self.num_heads = num_heads
        self.dropout = nn.Dropout(dropout)
        self.W_q = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_k = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_v = nn.Linear(num_hiddens, num_hiddens, bias=bias)
        self.W_o = nn.Linear(num_hiddens, num_hiddens)

    def forward(self, X):
        # Shape of queries, keys, values: (batch_size * num_heads, T, num_hiddens / num_heads)
        queries = transpose_qkv(self.W_q(X), self.num_heads)
        keys = transpose_qkv(self.W_k(X), self.num_heads)
        values = transpose_qkv(self.W_v(X), self.num_heads)

        T, d = queries.shape[1], queries.shape[-1]
        pos = torch.arange(T, device=X.device)
        future = pos[None, :] > pos[:, None]  # (T, T), True above the diagonal

        scores = torch.bmm(queries, keys.transpose(1, 2)) / math.sqrt(d)
        self.attention_weights = masked_softmax(scores, future)
        output = torch.bmm(self.dropout(self.attention_weights), values)
        # Shape of output_concat: (batch_size, T, num_hiddens)
        output_concat = transpose_output(output, self.num_heads)
        return self.W_o(output_concat)


TARGET = "MultiHeadAttention"
EXPECT = ()
RULES_BROKEN = ("mask-fill",)  # the math is right; its -1e6 fill, as d2l's masked_softmax is not the lesson's -inf, which the rule holds
RULE_MISTAKE = "fill-minus-1e9"  # the rule broken, named at its masked_fill (-1e6)
