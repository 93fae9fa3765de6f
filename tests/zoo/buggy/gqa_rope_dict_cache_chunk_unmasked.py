"""Buggy: grouped-query rotary attention with a dict KV cache whose causal rule only holds when the cache is empty:
several new tokens after a cached prompt are not masked among themselves.

Stands for a real-code pattern (the language model of a small vision-language project, removed from tests/realzoo/
with the provenance clean-up): a SmolLM/Llama-style layer - q/k/v/out projections without bias, fewer key/value
heads than query heads expanded with repeat_interleave, rotate-half rotary embedding at the positions after the
cached ones - taking a cache as a dict {'key': ..., 'value': ...} and always returning it; it asks SDPA for
is_causal only when the new tokens are the whole sequence (T_new == T_total and T_new > 1): one token per call is
right (it may see every key), a prompt is right, but two or more new tokens after a cached prompt see each other's
future.  Generation there decodes one token at a time, so the defect stays latent.  Written here from that
description, in its own names.

Mistake: a chunk of new tokens after cached ones is not causally masked among itself.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class GroupedRotaryAttention(nn.Module):
    def __init__(self, hidden_dim, n_heads, n_kv_heads, base=10000.0):
        super().__init__()
        if hidden_dim % n_heads or n_heads % n_kv_heads:
            raise ValueError("hidden_dim must divide into n_heads, and n_heads into n_kv_heads groups")
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.head_dim = hidden_dim // n_heads
        self.q_proj = nn.Linear(hidden_dim, n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_dim, n_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_dim, n_kv_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(n_heads * self.head_dim, hidden_dim, bias=False)
        inv = 1.0 / (base ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)

    def _rotate(self, t, start):
        pos = torch.arange(start, start + t.shape[2], device=t.device, dtype=self.inv_freq.dtype)
        ang = torch.outer(pos, self.inv_freq)
        ang = torch.cat((ang, ang), dim=-1).to(t.dtype)
        return t * ang.cos() + rotate_half(t) * ang.sin()

    def forward(self, x, block_kv_cache=None):
        B, T_new, _ = x.shape
        q = self.q_proj(x).view(B, T_new, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T_new, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T_new, self.n_kv_heads, self.head_dim).transpose(1, 2)
        start = 0 if block_kv_cache is None else block_kv_cache["key"].shape[2]
        q, k = self._rotate(q, start), self._rotate(k, start)
        if block_kv_cache is not None:
            k = torch.cat([block_kv_cache["key"], k], dim=2)
            v = torch.cat([block_kv_cache["value"], v], dim=2)
        block_kv_cache = {"key": k, "value": v}
        group = self.n_heads // self.n_kv_heads
        k_all = k.repeat_interleave(group, dim=1)
        v_all = v.repeat_interleave(group, dim=1)
        T_total = k_all.shape[2]
        y = F.scaled_dot_product_attention(q, k_all, v_all, is_causal=(T_new == T_total and T_new > 1))
        y = y.transpose(1, 2).reshape(B, T_new, -1)
        return self.out_proj(y), block_kv_cache


TARGET = "GroupedRotaryAttention"
EXPECT = ("kv-cache",)
DIAGNOSIS = "kvcache-chunk-unmasked"
