"""Buggy (student style, mask-not-sliced): a (1, 1, max_seq_len, max_seq_len) buffer registered with
persistent=False, then sliced `self.causal_mask[:T, :T]` as if it were 2-d: the slice cuts the two axes of size 1,
so the mask stays full size and masked_fill fails for any T < max_seq_len (found by a student trial: the report
said the mask was used unsliced and to cut its first n rows and columns, which the student believed it did).

Style: nanoGPT's fused `c_attn` split by `.split(C, dim=2)`, `c_proj`, a tril of ones compared with == 0.
"""
import torch
import torch.nn as nn


class BufferMaskAttention(nn.Module):
    def __init__(self, emb_dim, n_head, max_seq_len=64):
        super().__init__()
        assert emb_dim % n_head == 0
        self.n_head = n_head
        self.c_attn = nn.Linear(emb_dim, 3 * emb_dim)
        self.c_proj = nn.Linear(emb_dim, emb_dim)
        mask = torch.tril(torch.ones(max_seq_len, max_seq_len)).view(1, 1, max_seq_len, max_seq_len)
        self.register_buffer("causal_mask", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / (C // self.n_head) ** 0.5
        att = att.masked_fill(self.causal_mask[:T, :T] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


TARGET = "BufferMaskAttention"
EXPECT = ("output-shape",)
DIAGNOSIS = "mask-not-sliced"
LINE = 29
