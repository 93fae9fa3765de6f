"""Buggy (mask-hides-diagonal): ONE attention head followed by an output projection (the lesson's layer with a
single head, written without heads; its constructor takes no number of heads), whose mask is
torch.triu(ones, diagonal=0): it hides each token from itself too, so the first token sees nothing (a row of -inf:
NaN) and every other token misses its own key - the mistake of fairseq's SingleHeadAttention
(tests/realzoo/fairseq_single_head_attention_out_proj_weight_norm_hides_diagonal.py), here with plain Linears.
Read as the single-head form without an output projection, it failed on param-count alone with no mistake named.

Style: `wq` / `wk` / `wv` / `proj`, a bool buffer `hide` of the positions to hide.
"""
import torch
import torch.nn as nn


class OneHeadProjected(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout=0.0):
        super().__init__()
        self.wq = nn.Linear(d_in, d_out, bias=False)
        self.wk = nn.Linear(d_in, d_out, bias=False)
        self.wv = nn.Linear(d_in, d_out, bias=False)
        self.proj = nn.Linear(d_out, d_out)
        self.drop = nn.Dropout(dropout)
        self.register_buffer("hide", torch.triu(torch.ones(context_length, context_length)).bool())

    def forward(self, x):
        n = x.shape[1]
        q, k, v = self.wq(x), self.wk(x), self.wv(x)
        att = (q @ k.transpose(1, 2)) * q.shape[-1] ** -0.5
        att = att.masked_fill(self.hide[:n, :n], float("-inf"))
        return self.proj(self.drop(att.softmax(dim=-1)) @ v)


TARGET = "OneHeadProjected"
EXPECT = ("causal-leakage", "reference-match")
DIAGNOSIS = "mask-hides-diagonal"
