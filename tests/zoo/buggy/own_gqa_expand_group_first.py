"""Buggy (student style, gqa-repeat-not-interleave): a grouped-query layer that shares its key/value heads without
a copy, with expand(), but puts the new axis before the key/value heads: `t[:, None].expand(b, group, G, n, dh)
.reshape(b, H, n, dh)` tiles them ([k0, k1, k0, k1]) as `.repeat` does, so query head h meets key/value head h % G
instead of its group's h // group (`t[:, :, None].expand(b, G, group, n, dh)` is right).  A student's trial: the
report named the mistake but gave no line, and the trace marked nothing, as only `.repeat`/`.tile` were read.

Style: the helper `_expand_kv`, W_query / W_key / W_value, `num_kv_groups`, scale after the mask.
"""
import torch
import torch.nn as nn


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_in, d_out, num_heads, num_kv_groups, context_length):
        super().__init__()
        assert d_out % num_heads == 0 and num_heads % num_kv_groups == 0
        self.num_heads = num_heads
        self.num_kv_groups = num_kv_groups
        self.group_size = num_heads // num_kv_groups
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=False)
        self.W_key = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=False)
        self.W_value = nn.Linear(d_in, num_kv_groups * self.head_dim, bias=False)
        self.out_proj = nn.Linear(d_out, d_out)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def _expand_kv(self, t):
        # (b, G, n, dh) -> (b, H, n, dh) without copying, via expand
        b, G, n, dh = t.shape
        return t[:, None, :, :, :].expand(b, self.group_size, G, n, dh).reshape(b, self.num_heads, n, dh)  # BUG

    def forward(self, x):
        b, n, _ = x.shape
        q = self.W_query(x).view(b, n, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.W_key(x).view(b, n, self.num_kv_groups, self.head_dim).transpose(1, 2)
        v = self.W_value(x).view(b, n, self.num_kv_groups, self.head_dim).transpose(1, 2)
        k = self._expand_kv(k)
        v = self._expand_kv(v)
        scores = q @ k.transpose(2, 3)
        scores = scores.masked_fill(self.mask.bool()[:n, :n], -torch.inf)
        w = torch.softmax(scores / self.head_dim ** 0.5, dim=-1)
        ctx = (w @ v).transpose(1, 2).contiguous().view(b, n, -1)
        return self.out_proj(ctx)


TARGET = "GroupedQueryAttention"
EXPECT = ("reference-match", "gradient-match")
DIAGNOSIS = "gqa-repeat-not-interleave"
LINE = 30  # the expand in the helper, which the keys and the values both go through
