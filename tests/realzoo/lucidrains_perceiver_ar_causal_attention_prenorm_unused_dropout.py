"""Perceiver AR 0.0.1's CausalAttention: Phil Wang's first release of perceiver-ar-pytorch, its self-attention layer -
keyword-only CausalAttention(*, dim, dim_head=64, heads=8, dropout=0.) with a LayerNorm INSIDE (forward starts with
x = self.norm(x)), ONE bias-free to_qkv chunked [Q; K; V], heads by an einops rearrange, q scaled by dim_head ** -0.5
before an einsum, the causal mask made in forward (triu(j - i + 1)) and filled with -finfo.max, a bias-free to_out;
the `dropout` argument is accepted and never used (no dropout module at all).

Source: https://github.com/lucidrains/perceiver-ar-pytorch (perceiver-ar-pytorch 0.0.1 on PyPI, the distribution's
Home-page), file perceiver_ar_pytorch/perceiver_ar_pytorch.py as released in perceiver-ar-pytorch 0.0.1.
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2022 Phil Wang").
Copied: verbatim from the PyPI wheel perceiver-ar-pytorch==0.0.1 (pip download --no-deps): lines 1-3 of
perceiver_ar_pytorch/perceiver_ar_pytorch.py (imports; line 5, `from einops import rearrange`, is replaced by the
shim), lines 7-8 (exists) and lines 20-55 (CausalAttention).  Left out: FeedForward, CausalPrefixAttention (its
cross-attention over a prefix), PerceiverAR.
ADDED: a shim for `from einops import rearrange` (the two patterns the copied code uses; real einops when installed)
and this entry's constants.
Truth: correct attention behind a LayerNorm: mha_forward(LayerNorm(x)) with to_qkv's three row blocks as W_q, W_k,
W_v and to_out as W_o (no biases), exactly, no leak; the lesson's layer on x itself differs (in _truth.py).
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

TARGET = "CausalAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("keyword-only-constructor", "layernorm-inside", "fused-qkv-chunk", "einops", "head-dim-argument",
             "no-qkv-bias", "no-out-proj-bias", "finfo-max-fill", "no-context-length", "unused-dropout-argument")
FORWARD = "x"
NOTES = ("CausalAttention(*, dim, dim_head=64, heads=8, dropout=0.); forward(x) -> (b, n, dim); x is LayerNorm'd "
         "first; dropout is never applied")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("correct attention behind a LayerNorm kept inside the module (a recognised norm, switched off); "
                    "no output bias and no divisibility check (the head width is dim_head)")

def exists(val):
    return val is not None

class CausalAttention(nn.Module):
    def __init__(
        self,
        *,
        dim,
        dim_head = 64,
        heads = 8,
        dropout = 0.
    ):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.heads = heads
        inner_dim = heads * dim_head

        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias = False)
        self.to_out = nn.Linear(inner_dim, dim, bias = False)

    def forward(self, x):
        x = self.norm(x)

        q, k, v = self.to_qkv(x).chunk(3, dim = -1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = self.heads), (q, k, v))

        q = q * self.scale
        sim = einsum('b h i d, b h j d -> b h i j', q, k)

        i, j = sim.shape[-2:]
        causal_mask = torch.ones((i, j), device = x.device, dtype = torch.bool).triu(j - i + 1)
        sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)

        attn = sim.softmax(dim = -1)
        out = einsum('b h i j, b h j d -> b h i d', attn, v)

        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out)
