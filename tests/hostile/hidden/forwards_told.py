"""Hostile (red team 13): the lesson's layer, with FILL as its causal fill, that raises at its first float32 forward
with the number of forwards it was asked for until then.

A probe for a hidden check, handed in once before the real file: the checks a child is asked for follow from what
the checks before them found (causal-leakage asks 80 more forwards where it finds a leak, mask-fill runs only where
it passed), and a shown check that runs after a hidden one (reference-match, whose float32 probe comes after
causal-leakage) then says in its message what the hidden check found: on Gradescope, with causal-leakage hidden,
"RuntimeError: 229 forwards" for -inf against "309 forwards" for -1e4 (--seed 5; 102 for both now).
`tests/e2e/test_hostile.py::test_a_shown_check_never_runs_after_a_hidden_one`.
"""
import torch
import torch.nn as nn

FILL = float("-inf")
SEEN = [0]


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
        if x.dtype == torch.float32:
            raise RuntimeError(f"{SEEN[0]} forwards")
        SEEN[0] += 1
        B, n, _ = x.shape
        split = lambda t: t.view(B, n, self.h, self.dh).transpose(1, 2)
        q, k, v = split(self.W_query(x)), split(self.W_key(x)), split(self.W_value(x))
        s = (q @ k.transpose(2, 3) / self.dh ** 0.5).masked_fill(self.mask[:n, :n], FILL)
        w = self.dropout(torch.softmax(s, dim=-1))
        return self.out_proj((w @ v).transpose(1, 2).contiguous().view(B, n, self.h * self.dh))
