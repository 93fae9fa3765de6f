"""picogpt's MultiHead: per-head ModuleList of Head modules (key, query, value Linear(n_embd, head_size,
bias=False), declared KEYS FIRST, a registered tril buffer each), RoPE on q and k with INTERLEAVED pairs (x0, x1),
(x2, x3), ... from a RotaryEmbedding cache shared by the heads (cos/sin made in float32, grown on demand, a pos_offset
argument), concatenated heads into proj Linear(n_embd, n_embd) with bias, then dropout. The constructor needs a
rope_base beside (n_embd, n_head, block_size, dropout).

Source: https://github.com/ptarau/picogpt (the PyPI project's homepage), file picogpt/model.py as released in picogpt
0.1.1 on PyPI.
Licence: MIT (Copyright (c) 2025 Paul Tarau), LICENSE in the wheel's dist-info.
Copied: verbatim from the file picogpt/model.py of the PyPI wheel picogpt==0.1.1 (pip download --no-deps): its imports
and the classes RotaryEmbedding, the function apply_rope, the classes Head and MultiHead. FeedFwd, Block, TinyGPT and the
file's first comment lines are left out. ADDED: this entry's constants after the imports.
Truth: correct. Equal to rope_mha_forward (interleaved, theta 10000) with the heads' query/key/value weights stacked
and proj as W_o, to relative 1e-7 (the cos/sin tables are float32); no leak of the future.
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F

TARGET = "MultiHead"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("rope-interleaved", "per-head-modules", "keys-first-declaration", "float32-rope", "qkv-no-bias")
FORWARD = "x, pos_offset=0"
NOTES = ("MultiHead(n_embd, n_head, block_size, dropout, rope_base). forward(x, pos_offset=0) -> (B, n, n_embd). "
         "heads: ModuleList of Head(key, query, value: Linear(n_embd, n_embd // n_head, bias=False)); proj with bias.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = "the rotary lesson layer split into per-head modules, every rule followed"

class RotaryEmbedding(nn.Module):
    """
    RoPE cos/sin cache that grows on demand.
    head_dim must be even (we rotate pairs).
    """
    def __init__(self, head_dim: int, max_seq_len: int, base: float = 10000.0):
        super().__init__()
        assert head_dim % 2 == 0, "RoPE head_dim must be even"
        self.head_dim = head_dim
        self.base = base
        self.max_seq_len = max_seq_len

        half_dim = head_dim // 2
        inv_freq = base ** (-torch.arange(0, half_dim, dtype=torch.float32) / half_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

        t = torch.arange(max_seq_len, dtype=torch.float32).unsqueeze(1)  # (T,1)
        freqs = t * self.inv_freq.unsqueeze(0)                           # (T,D/2)
        self.register_buffer("cos_cached", freqs.cos(), persistent=False)
        self.register_buffer("sin_cached", freqs.sin(), persistent=False)

    @torch.no_grad()
    def _extend_to(self, new_max_seq_len: int, device, dtype):
        if new_max_seq_len <= self.max_seq_len:
            return
        t = torch.arange(self.max_seq_len, new_max_seq_len, dtype=torch.float32, device=device).unsqueeze(1)
        freqs = t * self.inv_freq.to(device).unsqueeze(0)
        cos_new = freqs.cos().to(dtype=dtype)
        sin_new = freqs.sin().to(dtype=dtype)
        self.cos_cached = torch.cat([self.cos_cached.to(device=device, dtype=dtype), cos_new], dim=0)
        self.sin_cached = torch.cat([self.sin_cached.to(device=device, dtype=dtype), sin_new], dim=0)
        self.max_seq_len = new_max_seq_len

    def get_cos_sin(self, T: int, device, pos_offset: int = 0, dtype=None):
        end = pos_offset + T
        use_dtype = dtype or torch.float32
        if end > self.max_seq_len:
            self._extend_to(end, device=device, dtype=use_dtype)
        cos = self.cos_cached[pos_offset:end].to(device=device, dtype=use_dtype)
        sin = self.sin_cached[pos_offset:end].to(device=device, dtype=use_dtype)
        return cos, sin


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """
    Rotate last-dim pairs by RoPE. Shapes:
      x:   (B,T,D) even D
      cos: (T,D/2), sin: (T,D/2)
    """
    x_even = x[..., ::2]
    x_odd  = x[..., 1::2]
    cos = cos.unsqueeze(0)  # (1,T,D/2)
    sin = sin.unsqueeze(0)  # (1,T,D/2)
    x_rot_even = x_even * cos - x_odd * sin
    x_rot_odd  = x_even * sin + x_odd * cos
    x_out = torch.empty_like(x)
    x_out[..., ::2] = x_rot_even
    x_out[..., 1::2] = x_rot_odd
    return x_out


class Head(nn.Module):
    """Single causal self-attention head with RoPE on Q/K."""
    def __init__(self, n_embd: int, head_size: int, block_size: int, dropout: float, rope: RotaryEmbedding):
        super().__init__()
        self.key   = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))
        self.dropout = nn.Dropout(dropout)
        self.rope = rope

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        k = self.key(x)
        q = self.query(x)
        v = self.value(x)

        q = apply_rope(q, cos, sin)
        k = apply_rope(k, cos, sin)

        wei = q @ k.transpose(-2, -1) / math.sqrt(k.size(-1))  # (B,T,T)
        wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        wei = F.softmax(wei, dim=-1)
        wei = self.dropout(wei)
        return wei @ v  # (B,T,hs)


class MultiHead(nn.Module):
    """Multi-head self-attention; shares a RoPE cache across heads."""
    def __init__(self, n_embd: int, n_head: int, block_size: int, dropout: float, rope_base: float):
        super().__init__()
        assert n_embd % n_head == 0
        head_size = n_embd // n_head
        assert head_size % 2 == 0, "head_size must be even for RoPE"
        self.rope = RotaryEmbedding(head_dim=head_size, max_seq_len=block_size, base=rope_base)
        self.heads = nn.ModuleList([Head(n_embd, head_size, block_size, dropout, self.rope) for _ in range(n_head)])
        self.proj = nn.Linear(n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, pos_offset: int = 0) -> torch.Tensor:
        T = x.size(1)
        cos, sin = self.rope.get_cos_sin(T, x.device, pos_offset=pos_offset, dtype=x.dtype)
        out = torch.cat([h(x, cos, sin) for h in self.heads], dim=-1)
        out = self.proj(out)
        return self.dropout(out)
