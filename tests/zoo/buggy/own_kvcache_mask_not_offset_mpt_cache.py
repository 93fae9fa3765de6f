"""Buggy (student style, kvcache-mask-not-offset, fixes28b item 2): MosaicML MPT's cache convention
(`past_key_value=None` means no cache at all; an empty tuple starts one, returned with the new keys), whose mask is
cut from the top of `tril` on every call. The report's kv-cache check began the cache with () and named the mistake,
but `mha-check trace` decoded with None, recorded a forward without a cache, and marked nothing: the report gave no
line.

Style: a fused `Wqkv` chunked in three, `att`, `tril`, `out_proj`.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Attn(nn.Module):
    def __init__(self, d_model, n_heads, max_seq_len):
        super().__init__()
        assert d_model % n_heads == 0
        self.n_heads = n_heads
        self.Wqkv = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.register_buffer("tril", torch.tril(torch.ones(max_seq_len, max_seq_len)))

    def forward(self, x, past_key_value=None):
        B, T, C = x.shape
        q, k, v = self.Wqkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, -1).transpose(1, 2) for t in (q, k, v))
        if past_key_value is not None:
            if len(past_key_value) != 0:
                k = torch.cat([past_key_value[0], k], dim=2)
                v = torch.cat([past_key_value[1], v], dim=2)
            past_key_value = (k, v)
        S = k.shape[2]
        att = q @ k.transpose(-2, -1) / (C // self.n_heads) ** 0.5
        att = att.masked_fill(self.tril[:T, :S] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        return self.out_proj(y), past_key_value


TARGET = "Attn"
EXPECT = ('kv-cache',)
DIAGNOSIS = 'kvcache-mask-not-offset'
LINE = 34
