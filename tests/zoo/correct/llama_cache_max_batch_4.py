"""Correct (student11, fixes28): `correct/llama_cache_buffer_detached.py` with Meta llama's small preallocated cache,
a max_batch_size of 4 by default. The float32 probes feed a batch of 8 to 16, and at that default the cache write
raised: reference-match was cannot tell. mha-check now binds a max_batch_size (max_batch, max_bsz, ...) to a batch
every probe fits in (harness.wire.config.MAX_BATCH), and reference-match decides: the layer passes every check.
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "LlamaAttention"


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    def __init__(self, dim, n_heads, n_kv_heads, max_seq_len, max_batch_size=4, rope_theta=10000.0):
        super().__init__()
        if dim % n_heads or n_heads % n_kv_heads:
            raise ValueError("dim must be divisible by n_heads, and n_heads by n_kv_heads")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.n_rep = n_heads // n_kv_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim)
        inv = 1.0 / rope_theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim)
        ang = torch.outer(torch.arange(max_seq_len).float(), inv)
        ang = torch.cat([ang, ang], dim=-1)
        self.register_buffer("cos", ang.cos(), persistent=False)
        self.register_buffer("sin", ang.sin(), persistent=False)
        self.register_buffer("cache_k", torch.zeros(max_batch_size, max_seq_len, n_kv_heads, self.head_dim),
                             persistent=False)
        self.register_buffer("cache_v", torch.zeros(max_batch_size, max_seq_len, n_kv_heads, self.head_dim),
                             persistent=False)

    def forward(self, x, start_pos=0):
        bsz, seqlen, _ = x.shape
        q = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        k = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        v = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        cos = self.cos[start_pos:start_pos + seqlen][None, :, None, :].to(x.dtype)
        sin = self.sin[start_pos:start_pos + seqlen][None, :, None, :].to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        self.cache_k = self.cache_k.to(x.dtype)
        self.cache_v = self.cache_v.to(x.dtype)
        self.cache_k[:bsz, start_pos:start_pos + seqlen] = k.detach()
        self.cache_v[:bsz, start_pos:start_pos + seqlen] = v.detach()
        keys = torch.cat([self.cache_k[:bsz, :start_pos], k], dim=1)
        values = torch.cat([self.cache_v[:bsz, :start_pos], v], dim=1)
        keys = keys.repeat_interleave(self.n_rep, dim=2)
        values = values.repeat_interleave(self.n_rep, dim=2)
        q, keys, values = q.transpose(1, 2), keys.transpose(1, 2), values.transpose(1, 2)
        scores = q @ keys.transpose(2, 3) / math.sqrt(self.head_dim)
        mask = torch.full((seqlen, start_pos + seqlen), float("-inf"), device=x.device)
        mask = torch.triu(mask, diagonal=start_pos + 1)
        scores = F.softmax(scores + mask, dim=-1)
        out = (scores @ values).transpose(1, 2).reshape(bsz, seqlen, -1)
        return self.wo(out)
