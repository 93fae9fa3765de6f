"""Buggy: grouped-query rotary attention with a (k, v) cache that asks SDPA for is_causal=True whenever more than one
token comes in - also after a cached prompt, where SDPA's triangle (aligned top-left) pairs the new tokens with the
wrong keys.

Stands for a real-code pattern (a small Llama/Qwen-style training project's attention before its "prompt prefill"
fix, removed from tests/realzoo/ with the provenance clean-up): transformers-style names (hidden_size,
num_attention_heads, num_key_value_heads), projections without bias, rotate-half rotary embedding at the positions
after the cached ones, repeat-by-group for the key/value heads, a past (k, v) tuple passed in and the new one
returned with use_cache; more than one new token goes to F.scaled_dot_product_attention(is_causal=True) whatever
the cache holds, one new token to an unmasked product (it may see every key).  Decoding one token per call is
right; a chunk of new tokens after a prompt is not (new token i sees only the first i + 1 keys of the whole cache).
Written here from that description, in its own names.

Mistake: is_causal=True on (n_new, n_cached + n_new) scores after a cached prompt (SDPA aligns its causal triangle
top-left); no catalogued mistake is exactly this one.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class PrefillAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads=None, rope_theta=10000.0):
        super().__init__()
        self.n_heads = num_attention_heads
        self.n_kv = num_key_value_heads or num_attention_heads
        assert hidden_size % self.n_heads == 0 and self.n_heads % self.n_kv == 0
        self.head_dim = hidden_size // self.n_heads
        self.q_proj = nn.Linear(hidden_size, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, self.n_kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, self.n_kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, hidden_size, bias=False)
        freqs = 1.0 / (rope_theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim))
        self.register_buffer("freqs", freqs, persistent=False)

    def _rope(self, t, start):
        pos = torch.arange(start, start + t.shape[1], device=t.device, dtype=self.freqs.dtype)
        ang = torch.outer(pos, self.freqs)
        ang = torch.cat((ang, ang), dim=-1)[None, :, None, :].to(t.dtype)
        return t * ang.cos() + rotate_half(t) * ang.sin()

    def forward(self, x, past_key_value=None, use_cache=False):
        bsz, seq_len, _ = x.shape
        q = self.q_proj(x).view(bsz, seq_len, self.n_heads, self.head_dim)
        k = self.k_proj(x).view(bsz, seq_len, self.n_kv, self.head_dim)
        v = self.v_proj(x).view(bsz, seq_len, self.n_kv, self.head_dim)
        start = 0 if past_key_value is None else past_key_value[0].shape[1]
        q, k = self._rope(q, start), self._rope(k, start)
        if past_key_value is not None:
            k = torch.cat([past_key_value[0], k], dim=1)
            v = torch.cat([past_key_value[1], v], dim=1)
        past = (k, v) if use_cache else None
        rep = self.n_heads // self.n_kv
        q = q.transpose(1, 2)
        k = k.repeat_interleave(rep, dim=2).transpose(1, 2)
        v = v.repeat_interleave(rep, dim=2).transpose(1, 2)
        if seq_len > 1:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = torch.softmax(q @ k.transpose(-2, -1) / self.head_dim ** 0.5, dim=-1) @ v
        y = y.transpose(1, 2).reshape(bsz, seq_len, -1)
        return self.o_proj(y), past


TARGET = "PrefillAttention"
EXPECT = ("kv-cache",)
DIAGNOSIS = None  # no catalogued mistake is a top-left causal triangle over cached keys
