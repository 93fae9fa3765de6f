"""x-transformers 0.0.1's Attention: the first release of Phil Wang's x-transformers, a causal-capable layer with a
`causal` flag off by default (the package's Decoder sets it), a bias-free to_q and ONE fused bias-free to_kv whose
row blocks are [W_k; W_v] (`chunk(2, dim=-1)`), heads by an einops rearrange, einsum scores scaled by
(dim // heads) ** -0.5, the causal mask made in forward by `triu_(1)` and filled in place with -inf, to_out with a
bias; an unused `mask` constructor argument and a `context`/`mask` pair in forward (the forward's `mask` is never
read).

Source: https://github.com/lucidrains/x-transformers (x-transformers 0.0.1 on PyPI, the distribution's Home-page),
file x_transformers/x_transformers.py as released in x-transformers 0.0.1.
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2020 Phil Wang").
Copied: verbatim from the PyPI wheel x-transformers==0.0.1 (pip download --no-deps): lines 1-3 of
x_transformers/x_transformers.py (imports; line 4, `from einops import rearrange`, is replaced by the shim; lines 6-9
repeat the same imports and are left out), lines 11-17 (exists, default) and lines 51-81 (Attention).  Left out:
Residual, PreNorm, FeedForward, Encoder, Decoder and the model classes.
ADDED: a shim for `from einops import rearrange` (the two patterns the copied code uses; real einops when installed)
and this entry's constants.
Truth: correct when built with causal=True: q = x W_q^T, [k; v] = to_kv's two row blocks, per-head softmax(q k^T /
sqrt(dim // heads)) with the future at -inf, merged head-major and projected by to_out (its bias): mha_forward
exactly, no leak (in _truth.py).  With the default causal=False the layer is bidirectional by design.
"""
import torch
import torch.nn.functional as F
from torch import nn, einsum

# --- added for the zoo: a shim for `from einops import rearrange` (the real einops when installed) ---
try:
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == 'b n (h d) -> b h n d':
            b, n, hd = t.shape
            h = axes['h']
            return t.reshape(b, n, h, hd // h).permute(0, 2, 1, 3)
        if pattern == 'b h n d -> b n (h d)':
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')
# --- end of shim; copied blocks follow ---

TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("causal-only-with-flag", "no-context-length", "fused-kv", "no-qkv-bias", "einops")
FORWARD = "x, context=None, mask=None"
NOTES = ("Attention(dim, heads=8, causal=False, mask=None); forward(x, context=None, mask=None) -> (b, n, dim); "
         "causal only with causal=True; to_kv.weight (2*dim, dim) = [W_k; W_v]; no Q/K/V biases, to_out has one.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("built with causal=True it is the lesson's layer with bias-free Q/K/V projections (K and V fused "
                    "in one Linear): the reference comparison passes")

# helpers

def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d


class Attention(nn.Module):
    def __init__(self, dim, heads = 8, causal = False, mask = None):
        super().__init__()
        assert (dim % heads) == 0, 'dimension must be divisible by number of heads'
        self.scale = (dim // heads) ** -0.5
        self.heads = heads
        self.causal = causal
        self.mask = mask

        self.to_q = nn.Linear(dim, dim, bias = False)
        self.to_kv = nn.Linear(dim, dim * 2, bias = False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x, context = None, mask = None):
        _, n, _, h, device = *x.shape, self.heads, x.device
        kv_input = default(context, x)

        q = self.to_q(x)
        kv = self.to_kv(kv_input).chunk(2, dim = -1)

        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, *kv))
        dots = einsum('b h i d, b h j d -> b h i j', q, k) * self.scale

        if self.causal:
            mask = torch.ones((n, n), device = device).triu_(1).bool()
            dots.masked_fill_(mask, float('-inf'))

        attn = dots.softmax(dim = -1)
        out = einsum('b h i j, b h j d -> b h i d', attn, v)
        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out)
