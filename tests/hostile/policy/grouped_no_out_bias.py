"""Hostile (red team 17): the lesson's multi-head layer without its output bias (mutant out-proj-no-bias: the one
mistake out-proj-bias catches), dressed as the grouped-query family by an optional `kv_heads` that defaults to one
key/value head per head, as Llama's `n_kv_heads` does.  mha-check builds it grouped too (it computes that right),
and out-proj-bias passes as not applying, the Llama family having no biases by design: 19 of 19 on Gradescope, for
an assignment that is the lesson's layer.  A course that asks for the lesson's layer says so in its rubric
(`grouped = false`): out-proj-bias then fails it, saying why (`tests/e2e/test_family_policy.py`)."""
import torch
import torch.nn as nn


class MyAttn(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, kv_heads=None):
        super().__init__()
        assert d_out % num_heads == 0
        kv_heads = num_heads if kv_heads is None else kv_heads
        self.h, self.kv, self.dh = num_heads, kv_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, self.kv * self.dh, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, self.kv * self.dh, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), 1).bool())

    def forward(self, x):
        B, n, _ = x.shape
        q = self.W_query(x).view(B, n, self.h, self.dh).transpose(1, 2)
        k = self.W_key(x).view(B, n, self.kv, self.dh).transpose(1, 2).repeat_interleave(self.h // self.kv, dim=1)
        v = self.W_value(x).view(B, n, self.kv, self.dh).transpose(1, 2).repeat_interleave(self.h // self.kv, dim=1)
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], float("-inf"))
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
