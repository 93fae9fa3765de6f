"""Correct: a whole pre-norm attention sublayer (LayerNorm of the queries, attention, dropout, the residual added
inside) whose forward needs the key/value sequences and their LENGTHS besides the queries, and which is causal only
when built for a decoder AND handed the same tensor as queries and keys/values.

Stands for a real-code pattern (a Transformer tutorial's MultiHeadAttention, removed from tests/realzoo/ with the
provenance clean-up, whose verdict there was cannot tell): spelled-out roles - a query projection, ONE fused
projection for keys and values ([K; V] rows), an output projection - with separate per-head widths for queries/keys
and for values, heads folded into the batch for bmm, padded keys masked from a required lengths tensor, and the
future masked only when in_decoder=True and torch.equal(queries, keys/values).  Written here from that description,
in its own names (unlike the removed code it refuses a width the heads do not divide, so no lesson rule fails).

mha-check cannot supply the context and its lengths, so output-shape cannot tell and every check after it waits.
"""
import math

import torch
import torch.nn as nn


class PreNormSublayer(nn.Module):
    def __init__(self, d_model, n_heads, d_queries, d_values, dropout=0.0, in_decoder=False):
        super().__init__()
        if d_model % n_heads:
            raise ValueError("d_model must be divisible by n_heads")
        self.n_heads, self.d_queries, self.d_values = n_heads, d_queries, d_values
        self.in_decoder = in_decoder
        self.to_q = nn.Linear(d_model, n_heads * d_queries)
        self.to_kv = nn.Linear(d_model, n_heads * (d_queries + d_values))
        self.to_out = nn.Linear(n_heads * d_values, d_model)
        self.norm = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, query_tokens, context_tokens, context_lengths):
        B, nq, _ = query_tokens.shape
        nk = context_tokens.shape[1]
        self_attending = torch.equal(context_tokens, query_tokens)
        skip = query_tokens
        query_tokens = self.norm(query_tokens)
        if self_attending:
            context_tokens = self.norm(context_tokens)
        q = self.to_q(query_tokens)
        k, v = self.to_kv(context_tokens).split(self.n_heads * self.d_queries, dim=-1)
        q = q.view(B, nq, self.n_heads, self.d_queries).permute(0, 2, 1, 3).reshape(-1, nq, self.d_queries)
        k = k.view(B, nk, self.n_heads, self.d_queries).permute(0, 2, 1, 3).reshape(-1, nk, self.d_queries)
        v = v.view(B, nk, self.n_heads, self.d_values).permute(0, 2, 1, 3).reshape(-1, nk, self.d_values)
        scores = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(self.d_queries)
        lengths = context_lengths.repeat_interleave(self.n_heads).view(-1, 1, 1)
        padded = torch.arange(nk, device=scores.device).view(1, 1, nk) >= lengths
        scores = scores.masked_fill(padded, float("-inf"))
        if self.in_decoder and self_attending:
            future = torch.ones(nq, nk, dtype=torch.bool, device=scores.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        out = torch.bmm(torch.softmax(scores, dim=-1), v)
        out = out.view(B, self.n_heads, nq, self.d_values).permute(0, 2, 1, 3).reshape(B, nq, -1)
        return self.drop(self.to_out(out)) + skip


TARGET = "PreNormSublayer"
CANNOT_TELL = ("output-shape",)
SAYS = ("context_tokens, context_lengths besides the input",)
ARG = None
