"""Buggy (student style, plain-list-projections): the query, key and value projections kept in a plain Python list
`self.projections` (indexed 0, 1, 2 in forward), heads as `n_heads`/`d_k`, a `dropout` submodule, and a mask built
with torch.full and triu in forward; the list is never registered, so model.parameters() misses those weights."""
import torch
import torch.nn as nn


class ListedProjectionsAttention(nn.Module):
    def __init__(self, d_model, n_heads, seq_len, dropout=0.0):
        super().__init__()
        assert d_model % n_heads == 0, "d_model is not a multiple of n_heads"
        self.n_heads, self.d_k = n_heads, d_model // n_heads
        self.projections = [nn.Linear(d_model, d_model) for _ in range(3)]
        self.output = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        batch, seq, d_model = x.shape
        q, k, v = [p(x).view(batch, seq, self.n_heads, self.d_k).transpose(1, 2) for p in self.projections]
        mask = torch.full((seq, seq), float("-inf"), device=x.device).triu(1)
        attn = torch.softmax(q @ k.transpose(-2, -1) / self.d_k ** 0.5 + mask, dim=-1)
        context = (self.dropout(attn) @ v).transpose(1, 2).contiguous().view(batch, seq, d_model)
        return self.output(context)


TARGET = "ListedProjectionsAttention"
EXPECT = ("registered", "param-count")
DIAGNOSIS = "plain-list-projections"
LINE = 13
