"""x-clip's Attention (lucidrains): one fused to_qkv without bias chunked [Q; K; V], einops heads, q * dim_head**-0.5,
einsum scores, -finfo.max fills for a (B, n) padding keep-mask and, with causal=True (False by default), for
triu(j - i + 1); the softmax taken in float32 whatever the input dtype and cast back; to_out = Sequential(Linear(inner,
dim, bias=False), LayerNorm(dim)): a LayerNorm AFTER the output projection, x-clip's own (a gain g only, no bias,
eps 1e-5 for float32 input and 1e-3 for any other dtype). The head width is the dim_head argument (64 by default).
With rotary_pos_emb (the text transformer's option) the rotation is applied to q, k AND v; that path is not driven.

Source: https://github.com/lucidrains/x-clip (the wheel's METADATA Home-page), file x_clip/x_clip.py as released in
x-clip 0.14.4 on PyPI.
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2021 Phil Wang").
Copied: verbatim from the PyPI wheel x-clip==0.14.4 (pip download --no-deps): lines 1-10 of x_clip/x_clip.py
(imports), 19-28 (identity, exists, default), 112-121 (LayerNorm), 153-173 (RotaryEmbedding, rotate_half,
apply_rotary_pos_emb) and 201-245 (Attention). Lines 12-13 (einops) are replaced by the shim below (the real einops
when installed); the package's own imports (lines 15-17) serve the classes left out.
ADDED: the shim and this entry's constants.
Truth: correct multi-head attention followed by a LayerNorm of its own: with causal=True, in eval(), the output is
LN_g(mha_forward(x) with to_qkv's thirds as W_q, W_k, W_v, no biases, W_o = to_out[0] without bias) where LN_g(y) =
(y - mean) / sqrt(var + 1e-3) * g over the last axis (eps 1e-3 in float64), to relative 1e-5 (the softmax is float32);
no leak. With causal=False the future moves the past.
"""
import math
import copy
from contextlib import contextmanager
from functools import partial, wraps

import torch
import torch.nn.functional as F
import torch.distributed as distributed
from torch import nn, einsum
from torch.utils.checkpoint import checkpoint
# --- added for the zoo: a shim for `from einops import rearrange` (the four patterns the copied block uses; the real
# einops when installed) ---
try:
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == 'b n (h d) -> b h n d':
            b, n, hd = t.shape
            return t.reshape(b, n, axes['h'], hd // axes['h']).permute(0, 2, 1, 3)
        if pattern == 'b h n d -> b n (h d)':
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        if pattern == 'b j -> b 1 1 j':
            return t[:, None, None, :]
        if pattern == '... (j d) -> ... j d':
            return t.reshape(*t.shape[:-1], axes['j'], t.shape[-1] // axes['j'])
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')
# --- end of shim; copied blocks follow ---

TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("causal-only-with-flag", "head-dim-argument", "no-biases", "layernorm-after-out-proj",
             "float32-softmax", "padding-mask-argument-named-mask")
FORWARD = "x, mask=None, rotary_pos_emb=None"
NOTES = ("Attention(dim, dim_head=64, heads=8, causal=False, dropout=0.). forward(x, mask=None, rotary_pos_emb=None) "
         "-> (B, n, dim); to_out = Sequential(Linear(heads * dim_head, dim, bias=False), LayerNorm(dim)).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("correct causal attention with causal=True, followed by a LayerNorm of its own (switched off as a "
                    "recognised norm); no output bias and no divisibility check (the head width is dim_head)")

# helper functions

def identity(t, *args, **kwargs):
    return t

def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d

class LayerNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.g = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        eps = 1e-5 if x.dtype == torch.float32 else 1e-3
        var = torch.var(x, dim = -1, unbiased = False, keepdim = True)
        mean = torch.mean(x, dim = -1, keepdim = True)
        return (x - mean) * (var + eps).rsqrt() * self.g

# rotary positional embedding

class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1. / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer('inv_freq', inv_freq)

    def forward(self, seq_len, device):
        inv_freq = self.inv_freq
        t = torch.arange(seq_len, device = device).type_as(inv_freq)
        freqs = torch.einsum('i , j -> i j', t, inv_freq)
        return torch.cat((freqs, freqs), dim = -1)

def rotate_half(x):
    x = rearrange(x, '... (j d) -> ... j d', j = 2)
    x1, x2 = x.unbind(dim = -2)
    return torch.cat((-x2, x1), dim = -1)

def apply_rotary_pos_emb(freqs, t):
    rot_dim = freqs.shape[-1]

class Attention(nn.Module):
    def __init__(self, dim, dim_head = 64, heads = 8, causal = False, dropout = 0.):
        super().__init__()
        self.heads = heads
        self.causal = causal
        self.scale = dim_head ** -0.5
        inner_dim = dim_head * heads

        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias = False)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, dim, bias = False), LayerNorm(dim))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask = None, rotary_pos_emb = None):
        h, device, scale = self.heads, x.device, self.scale

        q, k, v = self.to_qkv(x).chunk(3, dim = -1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, k, v))

        q = q * self.scale

        if exists(rotary_pos_emb):
            apply_rotary = partial(apply_rotary_pos_emb, rotary_pos_emb)
            q, k, v = map(apply_rotary, (q, k, v))

        sim = einsum('b h i d, b h j d -> b h i j', q, k)

        mask_value = -torch.finfo(sim.dtype).max

        if exists(mask):
            mask = rearrange(mask, 'b j -> b 1 1 j')
            sim = sim.masked_fill(~mask, mask_value)

        if self.causal:
            i, j = sim.shape[-2:]
            causal_mask = torch.ones((i, j), dtype = torch.bool, device = device).triu(j - i + 1)
            sim = sim.masked_fill(causal_mask, mask_value)

        attn = sim.softmax(dim = -1, dtype = torch.float32)
        attn = attn.type(sim.dtype)

        attn = self.dropout(attn)

        out = einsum('b h i j, b h j d -> b h i d', attn, v)
        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out)
