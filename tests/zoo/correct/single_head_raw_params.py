"""Correct: the single-head causal attention with raw nn.Parameter matrices used as x @ W.

Style: the previous lesson's first `SelfAttention_v1`, grown up: W_query, W_key, W_value are nn.Parameter of
shape (d_in, d_out) (x @ W, the transpose of nn.Linear's weight), drawn with randn / sqrt(d_in), no biases.  The causal mask is made in forward on
x's device with torch.tril and applied with `masked_fill(mask == 0, -torch.inf)`; the scores are scaled with
torch.sqrt of the keys' width as a tensor; torch.einsum for the two products.  No dropout argument, no context
length (nothing to pre-compute): the constructor is (input_dimension, output_dimension).
"""
import torch
import torch.nn as nn

TARGET = "CausalSelfAttentionV1"
EXPECT = ()


class CausalSelfAttentionV1(nn.Module):
    def __init__(self, input_dimension, output_dimension):
        super().__init__()
        scale = input_dimension ** -0.5
        self.W_query = nn.Parameter(torch.randn(input_dimension, output_dimension) * scale)
        self.W_key = nn.Parameter(torch.randn(input_dimension, output_dimension) * scale)
        self.W_value = nn.Parameter(torch.randn(input_dimension, output_dimension) * scale)

    def forward(self, x):
        n = x.shape[1]
        queries, keys, values = x @ self.W_query, x @ self.W_key, x @ self.W_value
        scores = torch.einsum("bqd,bkd->bqk", queries, keys)
        scores = scores / torch.sqrt(torch.tensor(keys.shape[-1], dtype=x.dtype))
        keep = torch.tril(torch.ones(n, n, device=x.device))
        scores = scores.masked_fill(keep == 0, -torch.inf)
        weights = torch.softmax(scores, dim=-1)
        return torch.einsum("bqk,bkd->bqd", weights, values)
