"""Buggy (student style, gqa-repeat-not-interleave): a grouped-query layer whose key/value heads are copied with
`.repeat(1, n_rep, 1, 1)`, which tiles them ([k0, k1, k0, k1]): query head h meets key/value head h % n_kv_head
instead of its group's h // n_rep.  With one key/value head, or as many as the heads, the output is right.

Style: `n_kv_head`, `n_rep`, projections W_q / W_k / W_v and an output `proj`, `att` for the weights.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class GroupedAttention(nn.Module):
    def __init__(self, n_embd, n_head, n_kv_head, block_size):
        super().__init__()
        assert n_embd % n_head == 0 and n_head % n_kv_head == 0
        self.n_head, self.n_kv_head, self.hs = n_head, n_kv_head, n_embd // n_head
        self.n_rep = n_head // n_kv_head
        self.W_q = nn.Linear(n_embd, n_embd, bias=False)
        self.W_k = nn.Linear(n_embd, n_kv_head * self.hs, bias=False)
        self.W_v = nn.Linear(n_embd, n_kv_head * self.hs, bias=False)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def forward(self, x):
        B, T, C = x.shape
        q = self.W_q(x).view(B, T, self.n_head, self.hs).transpose(1, 2)
        k = self.W_k(x).view(B, T, self.n_kv_head, self.hs).transpose(1, 2)
        v = self.W_v(x).view(B, T, self.n_kv_head, self.hs).transpose(1, 2)
        k = k.repeat(1, self.n_rep, 1, 1)  # BUG: tiles the key/value heads
        v = v.repeat(1, self.n_rep, 1, 1)
        att = q @ k.transpose(-2, -1) * self.hs ** -0.5
        att = att.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        out = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


TARGET = "GroupedAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "gqa-repeat-not-interleave"
LINE = 29  # the student's line the report must point to (the values' line, 30, is marked too)
