"""hourglass-transformer-pytorch 0.0.6's Attention (lucidrains' Hourglass Transformer, used at every level of the
hourglass): Attention(dim, heads=8, dim_head=64, dropout=0., causal=False) - heads AND the head width both with
defaults, inner width heads * dim_head (no check that it equals dim); to_q and a fused to_kv (no bias), to_out with a
bias; q pre-scaled by dim_head ** -0.5, einsum scores, an optional `mask` that is a PADDING mask (b, j) of the keys,
True = keep (rearranged 'b j -> b () () j'), the future filled with -finfo.max when the causal FLAG is set,
forward(x, context=None, mask=None) (context: cross-attention).

Source: https://github.com/lucidrains/hourglass-transformer-pytorch (the wheel's METADATA Home-page), file
hourglass_transformer_pytorch/hourglass_transformer_pytorch.py as released in hourglass-transformer-pytorch 0.0.6
on PyPI; Transformer (same file) builds it as Attention(dim, heads=heads, dim_head=dim_head, dropout=attn_dropout,
causal=causal) and calls attn(x, context=context, mask=mask) with the model's (b, n) padding mask.
Licence: MIT (LICENSE in the wheel's dist-info, "Copyright (c) 2021 Phil Wang"; METADATA "License: MIT").
Copied: verbatim from the PyPI wheel hourglass-transformer-pytorch==0.0.6 (pip download --no-deps), every copied line
compared by program with the unpacked wheel: lines 1-3 (imports), 8-12 (exists, default) and 94-142 (class
Attention, whole).  Left out: line 4 (einops) and 13-93, 143-end (padding, up/down-sampling, the feed-forward, the
transformer and the hourglass models).
ADDED: this docstring, the einops shim (three patterns; the real einops when installed) and the entry's constants.
Truth: correct (in _truth.py): Attention(12, heads=3, dim_head=4, causal=True) in eval() = mha_forward (to_q, to_kv's
halves [K; V], to_out with its bias) and the per-head loop to 1e-15, no leak; given mask = ones(B, n) (nothing
padded) the same; a padded key 0 (False) is hidden from the later queries; with causal=False the future moves the
past.
"""
import torch
from torch import nn, einsum
import torch.nn.functional as F

# --- added for the zoo: a shim for `from einops import rearrange` (the real einops when installed) ---
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
        if pattern == 'b j -> b () () j':
            return t.reshape(t.shape[0], 1, 1, t.shape[-1])
        if pattern == 'i j -> () () i j':
            return t.reshape(1, 1, *t.shape)
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')
# --- end of the added shim ---

def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d

class Attention(nn.Module):
    def __init__(
        self,
        dim,
        heads = 8,
        dim_head = 64,
        dropout = 0.,
        causal = False
    ):
        super().__init__()
        self.heads = heads
        self.causal = causal
        self.scale = dim_head ** -0.5
        inner_dim = heads * dim_head

        self.to_q = nn.Linear(dim, inner_dim, bias = False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias = False)
        self.to_out = nn.Linear(inner_dim, dim)

        self.dropout = nn.Dropout(dropout)

    def forward(self, x, context = None, mask = None):
        h, device = self.heads, x.device
        kv_input = default(context, x)

        q, k, v = self.to_q(x), *self.to_kv(kv_input).chunk(2, dim = -1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, k, v))

        q = q * self.scale

        sim = einsum('b h i d, b h j d -> b h i j', q, k)
        mask_value = -torch.finfo(sim.dtype).max

        if exists(mask):
            mask = rearrange(mask, 'b j -> b () () j')
            sim = sim.masked_fill(~mask, mask_value)

        if self.causal:
            i, j = sim.shape[-2:]
            mask = torch.ones(i, j, device = device, dtype = torch.bool).triu_(j - i + 1)
            mask = rearrange(mask, 'i j -> () () i j')
            sim = sim.masked_fill(mask, mask_value)

        attn = sim.softmax(dim = -1)
        attn = self.dropout(attn)

        out = einsum('b h i j, b h j d -> b h i d', attn, v)
        out = rearrange(out, 'b h n d -> b n (h d)', h = h)
        return self.to_out(out)


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("causal-only-with-flag", "padding-mask-named-mask", "head-dim-argument", "einsum", "q-pre-scaled",
             "no-divisibility-check", "no-context-length")
FORWARD = "x, context=None, mask=None"
NOTES = ("Attention(dim, heads=8, dim_head=64, dropout=0., causal=False): causal only with the flag; `mask` is a (b, j) "
         "padding mask of the keys, True = keep.")
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = ("built as Attention(dim, heads, causal=True, dim_head=dim // heads): the lesson's layer (to_q, "
                    "to_kv [K; V], to_out with bias, -finfo.max fill); the head width is an argument and nothing "
                    "refuses a width the heads do not divide (as RETRO's)")
