"""Buggy (student style, gqa-mask-one-group): a grouped-query layer that masks only the first group of query heads,
`att[:, :g].masked_fill_(...)`, as if the heads sharing a key/value head shared its mask too: the other groups'
tokens see the future.  The trace read the in-place fill through the slice as a result never used (it writes `att`
through a view), and named no-mask where the report named gqa-mask-one-group: the recorder now has what reads
`att` next read the fill.

Style: `num_kv_groups` / `g`, q_proj / k_proj / v_proj / o_proj, repeat_interleave on the heads axis, `att` masked
in place through a slice, a boolean `causal` buffer.
"""
import torch
import torch.nn as nn


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_groups, context_length):
        super().__init__()
        assert d_model % num_heads == 0 and num_heads % num_kv_groups == 0
        self.num_heads, self.num_kv_groups = num_heads, num_kv_groups
        self.head_dim = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, num_kv_groups * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_groups * self.head_dim, bias=False)
        self.o_proj = nn.Linear(d_model, d_model)
        self.register_buffer("causal", torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1))

    def forward(self, x):
        B, T, D = x.shape
        g = self.num_heads // self.num_kv_groups
        q = self.q_proj(x).view(B, T, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.num_kv_groups, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.num_kv_groups, self.head_dim).transpose(1, 2)
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        att = q @ k.transpose(-2, -1) / self.head_dim ** 0.5
        att[:, :g].masked_fill_(self.causal[:T, :T], float("-inf"))
        att = att.softmax(dim=-1)
        return self.o_proj((att @ v).transpose(1, 2).reshape(B, T, D))


TARGET = "GroupedQueryAttention"
EXPECT = ("causal-leakage", "reference-match", "gradient-match")
DIAGNOSIS = "gqa-mask-one-group"
LINE = 34
