"""speculative-decoding 0.2.0's CausalAttention: Phil Wang's decoder layer for speculative decoding - keyword-only
CausalAttention(dim, *, dim_head=64, heads=8), an nn.RMSNorm INSIDE (forward starts with x = self.norm(x)), ONE
bias-free to_qkv split by an einops rearrange 'b n (qkv h d) -> qkv b h n d', a KV CACHE passed in and returned as
one stacked tensor (b, 2, h, j, d) holding the keys BEFORE the rotary embedding, a rotate-half rotary embedding whose
table (the whole sequence's angles, cache included) comes from the caller as `rotary_emb` and is sliced to the last
rows for q and for k (apply_rotary_pos_emb: pos[-seq_len:]), q . k * dim_head ** -0.5 by einsum, a causal mask
made in forward (triu(j - i + 1), right-aligned for a chunk after a cache) filled with -finfo.max, an optional
(b, j) padding keep-mask `context_mask`, a bias-free to_out; forward returns (out, cached_kv).

Source: https://github.com/lucidrains/speculative-decoding (speculative-decoding 0.2.0 on PyPI, the distribution's
Home-page), file speculative_decoding/speculative_decoding.py as released in speculative-decoding 0.2.0.
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2023 Phil Wang").
Copied: verbatim from the PyPI wheel speculative_decoding==0.2.0 (pip download --no-deps): lines 3-5 of
speculative_decoding/speculative_decoding.py (imports; line 12, `from einops import rearrange`, is replaced by the
shim), lines 20-21 (exists), lines 45-66 (RotaryEmbedding, rotate_half, apply_rotary_pos_emb) and lines 418-480
(CausalAttention).  Left out: the sampling and decoding functions, FeedForward, Decoder.
ADDED: a shim for `from einops import rearrange` (the three patterns the copied code uses; real einops when
installed), this entry's constants, and the factory SpeculativeDecodingAttention below, which builds the rotary
table as Decoder.__init__ does (RotaryEmbedding(dim = dim_head)) and calls the layer as Decoder.forward does: the
table for the whole sequence (cached tokens + new ones), `cache` passed through, (out, cached_kv) returned.
Truth: correct. Through the factory, out = the rotate-half rotary reference on RMSNorm(x) (to_qkv's three row
blocks as W_q, W_k, W_v, to_out as W_o, no biases), to relative 1e-5 (float32 inverse frequencies), no leak; a
prompt then two new tokens with the returned cache = the whole sequence at once (in _truth.py, with an independent
per-head loop).  Without `rotary_emb` the class itself is plain multi-head attention behind the RMSNorm.
"""
import torch
from torch.nn import Module, ModuleList
from torch import nn, einsum, Tensor

# --- added for the zoo: a shim for `from einops import rearrange` (the real einops when installed) ---
try:
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == 'b n (qkv h d) -> qkv b h n d':
            b, n, total = t.shape
            qkv, h = axes['qkv'], axes['h']
            return t.reshape(b, n, qkv, h, total // (qkv * h)).permute(2, 0, 3, 1, 4)
        if pattern == 'b h n d -> b n (h d)':
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        if pattern == 'b j -> b 1 1 j':
            return t[:, None, None, :]
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')
# --- end of shim ---

TARGET = "SpeculativeDecodingAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("keyword-only-constructor", "rmsnorm-inside", "fused-qkv-rearrange", "einops", "head-dim-argument",
             "rope-table-from-caller", "rotate-half-rope", "kv-cache-stacked-tensor", "tuple-output", "no-biases",
             "finfo-max-fill", "no-context-length")
FORWARD = "x, cache=None (via the factory; the class: x, cache=None, context_mask=None, rotary_emb=None)"
NOTES = ("SpeculativeDecodingAttention(d, heads, context_length=None) wraps CausalAttention(d, dim_head=d // heads, "
         "heads=heads) and RotaryEmbedding(d // heads); forward(x, cache=None) -> (out, cached_kv)")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("rotate-half rotary attention behind an RMSNorm kept inside (recognised, switched off), its cache "
                    "right for a prompt then single tokens; no output bias and no divisibility check (the head width "
                    "is dim_head)")

def exists(val):
    return val is not None

# rotary embeddings

class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, seq_len):
        t = torch.arange(seq_len, device = self.inv_freq.device).type_as(self.inv_freq)
        freqs = einsum('i, j -> i j', t, self.inv_freq)
        freqs = torch.cat((freqs, freqs), dim = -1)
        return freqs

def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)

def apply_rotary_pos_emb(pos, t):
    seq_len = t.shape[-2]
    pos = pos[-seq_len:, :]
    return t * pos.cos() + rotate_half(t) * pos.sin()

# attention and feedforward

class CausalAttention(Module):
    def __init__(
        self,
        dim,
        *,
        dim_head = 64,
        heads = 8,
    ):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.heads = heads
        dim_inner = dim_head * heads

        self.norm = nn.RMSNorm(dim)

        self.to_qkv = nn.Linear(dim, dim_inner * 3, bias = False)
        self.to_out = nn.Linear(dim_inner, dim, bias = False)

    def forward(
        self,
        x,
        cache = None,
        context_mask = None,
        rotary_emb = None
    ):
        h, device = self.heads, x.device

        x = self.norm(x)

        q, k, v = rearrange(self.to_qkv(x), 'b n (qkv h d) -> qkv b h n d', qkv = 3, h = h)

        if exists(cache):
            ck, cv = cache.unbind(dim = 1)
            k = torch.cat((ck, k), dim = -2)
            v = torch.cat((cv, v), dim = -2)

        cached_kv = torch.stack((k, v), dim = 1)

        if exists(rotary_emb):
            q = apply_rotary_pos_emb(rotary_emb, q)
            k = apply_rotary_pos_emb(rotary_emb, k)

        sim = einsum('b h i d, b h j d -> b h i j', q, k) * self.scale

        i, j = sim.shape[-2:]
        causal_mask = torch.ones((i, j), device = device, dtype = torch.bool).triu(j - i + 1)

        sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)

        if exists(context_mask):
            context_mask = rearrange(context_mask, 'b j -> b 1 1 j')
            sim = sim.masked_fill(~context_mask, -torch.finfo(sim.dtype).max)

        attn = sim.softmax(dim = -1)

        out = einsum('b h i j, b h j d -> b h i d', attn, v)

        out = rearrange(out, 'b h n d -> b n (h d)')
        out = self.to_out(out)

        return out, cached_kv


# --- added for the zoo: the factory (Decoder.__init__ and Decoder.forward's calls of the layer) ---
class SpeculativeDecodingAttention(Module):
    def __init__(self, d, heads, context_length=None):
        super().__init__()
        self.attn = CausalAttention(dim = d, dim_head = d // heads, heads = heads)
        self.rotary_emb = RotaryEmbedding(dim = d // heads)

    def forward(self, x, cache = None):
        seq_len = x.shape[-2] + (cache.shape[-2] if exists(cache) else 0)
        rotary_emb = self.rotary_emb(seq_len)
        return self.attn(x, rotary_emb = rotary_emb, cache = cache)
