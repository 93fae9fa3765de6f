"""DALLE-pytorch's (lucidrains) Attention: fused to_qkv chunked in three, einops rearrange, einsum, q pre-scaled, causal=True by default with a mask made per call (triu(j - i + 1)), masked with -finfo.max, a `mask` argument that is a PADDING keep-mask (B, n) and not a causal mask, a required but unused `seq_len`, a head width (dim_head=64) independent of dim, and an optional cache dict.

Source: https://github.com/lucidrains/dalle-pytorch (the repository the wheel's METADATA names), file dalle_pytorch/attention.py (helpers exists, uniq, default, max_neg_value, stable_softmax, apply_pos_emb and class Attention) as released in dalle-pytorch 1.6.6 on PyPI.
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2021 Phil Wang").
Copied: verbatim from the PyPI wheel dalle-pytorch==1.6.6 (pip download --no-deps): lines 1-6 of dalle_pytorch/attention.py (the imports up to `import torch.nn.functional as F`) and lines 11-99 (everything from `# helpers` to the end of class Attention); every copied line compared by program with the unpacked wheel. The sparse attention classes are left out. ADDED: shims for `from einops import rearrange, repeat` (the three patterns the copied code uses; real einops when installed) and for `from rotary_embedding_torch import apply_rotary_emb` (only reached when forward is given rotary_pos_emb), and this entry's constants after the shims.
Truth: correct causal multi-head attention for the default causal=True, stable=False, static_mask=None, mask=None, no cache: to_qkv Linear(dim, 3 * heads * dim_head, bias=False) read as [W_q; W_k; W_v] row blocks, heads split 'b n (h d) -> b h n d', q * dim_head**-0.5, scores by einsum, masked_fill_(triu(ones(i, j), j - i + 1), -finfo.max) (a finite fill: exact here because exp(-finfo.max - max) is 0 in float64 for any finite scores), softmax(-1), einsum with v, merge 'b h n d -> b n (h d)', to_out = Linear(heads * dim_head, dim) WITH bias then Dropout. The head width is dim_head (default 64), not dim // heads; no divisibility check (none is needed); seq_len is stored and never used.
"""
from inspect import isfunction
from math import ceil

import torch
from torch import nn, einsum
import torch.nn.functional as F
# --- added for the zoo: shims for the two imports the copied block needs (the real packages when installed) ---
try:
    from einops import rearrange, repeat
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == 'b n (h d) -> b h n d':
            b, n, hd = t.shape
            h = axes['h']
            return t.reshape(b, n, h, hd // h).permute(0, 2, 1, 3)
        if pattern == 'b h n d -> b n (h d)':
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        if pattern == 'b j -> b () () j':
            b, j = t.shape
            return t.reshape(b, 1, 1, j)
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')
    repeat = None  # imported by the original module, used only by the sparse attention classes (not copied)

try:
    from rotary_embedding_torch import apply_rotary_emb
except ImportError:  # pragma: no cover - only reached when forward is given rotary_pos_emb
    def apply_rotary_emb(freqs, t):
        raise NotImplementedError('rotary_embedding_torch is not installed (shim)')
# --- end of shims; copied block follows ---

TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-qkv-bias", "head-dim-argument", "no-divisibility-check", "padding-mask-argument-named-mask",
             "unused-seq-len-argument", "finite-fill-finfo-max")
FORWARD = "x, mask=None, rotary_pos_emb=None, cache=None, cache_key=None"
NOTES = ("Attention(dim, seq_len, causal=True, heads=8, dim_head=64, dropout=0., stable=False, static_mask=None). "
         "forward(x, mask=None, ...): mask is a (B, n) boolean keep-mask over the KEYS (padding), not a causal mask; "
         "causality comes from causal=True. Weights to_qkv.weight (3 * heads * dim_head, dim) = [W_q; W_k; W_v], "
         "to_out.0 Linear(heads * dim_head, dim) with bias.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = 'correct and causal by default (causal=True), called as m(x); the head width is its own argument (dim_head), so the lesson rule "heads divide the width" is not checked (named, as for the other dim_head layers)'

# helpers

def exists(val):
    return val is not None

def uniq(arr):
    return{el: True for el in arr}.keys()

def default(val, d):
    if exists(val):
        return val
    return d() if isfunction(d) else d

def max_neg_value(t):
    return -torch.finfo(t.dtype).max

def stable_softmax(t, dim = -1, alpha = 32 ** 2):
    t = t / alpha
    t = t - torch.amax(t, dim = dim, keepdim = True).detach()
    return (t * alpha).softmax(dim = dim)

def apply_pos_emb(pos_emb, qkv):
    n = qkv[0].shape[-2]
    pos_emb = pos_emb[..., :n, :]
    return tuple(map(lambda t: apply_rotary_emb(pos_emb, t), qkv))

# classes

class Attention(nn.Module):
    def __init__(self, dim, seq_len, causal = True, heads = 8, dim_head = 64, dropout = 0., stable = False,
                 static_mask = None):
        super().__init__()
        inner_dim = dim_head *  heads
        self.heads = heads
        self.seq_len = seq_len
        self.scale = dim_head ** -0.5

        self.stable = stable
        self.causal = causal
        self.register_buffer('static_mask', static_mask, persistent=False)

        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias = False)
        self.to_out = nn.Sequential(
            nn.Linear(inner_dim, dim),
            nn.Dropout(dropout)
        )

    def forward(self, x, mask = None, rotary_pos_emb = None, cache = None, cache_key = None):
        b, n, _, h, device = *x.shape, self.heads, x.device
        softmax = torch.softmax if not self.stable else stable_softmax
        offset = cache.get('offset', 0) if exists(cache) else 0

        qkv = self.to_qkv(x).chunk(3, dim = -1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), qkv)

        if exists(rotary_pos_emb):
            q, k, v = apply_pos_emb(rotary_pos_emb[..., offset:, :], (q, k, v))

        q = q * self.scale

        if offset > 0:
            k_top, v_top = cache[cache_key]
            k = torch.cat([k_top, k], dim=-2)
            v = torch.cat([v_top, v], dim=-2)
        if exists(cache):
            cache[cache_key] = k, v

        dots = torch.einsum('b h i d, b h j d -> b h i j', q, k)
        mask_value = max_neg_value(dots)

        if exists(mask):
            mask = rearrange(mask, 'b j -> b () () j')
            dots.masked_fill_(~mask, mask_value)
            del mask

        if self.causal and offset == 0:  # causality is naturally enforced for the cached inference
            i, j = dots.shape[-2:]
            mask = torch.ones(i, j, device = device).triu_(j - i + 1).bool()
            dots.masked_fill_(mask, mask_value)

        if exists(self.static_mask):
            dots.masked_fill_(~self.static_mask[offset:offset + n, :offset + n], mask_value)

        attn = softmax(dots, dim=-1)

        out = torch.einsum('b h i j, b h j d -> b h i d', attn, v)
        out = rearrange(out, 'b h n d -> b n (h d)')
        out =  self.to_out(out)
        return out
