"""RETRO-pytorch's (lucidrains) Attention: ONE class for self- and cross-attention (forward(x, mask=None,
context=None, pos_emb=None): keys and values from `context` when given, else from x), keyword-only dim_head / heads /
causal, separate to_q / to_k / to_v without bias (to_k, to_v read context_dim), einops head split, q pre-scaled by
dim_head ** -0.5, optional rotary (pos_emb) and learned null key / value (null_kv), a (B, n) padding keep-mask, the
causal mask made per call as triu(j - i + 1) and filled with -finfo.max, einsum, to_out with bias.  RETRO's decoder
builds it as Attention(dim=dim, dim_head=dim_head, heads=heads, dropout=attn_dropout, causal=True), the same class
serving its encoder's cross-attention and (null_kv=True) the chunked cross-attention.

Source: https://github.com/lucidrains/RETRO-pytorch (the wheel's Home-page), file retro_pytorch/retro_pytorch.py as
released in retro-pytorch 0.3.9 on PyPI.
Licence: MIT as the wheel's METADATA declares it ("License: MIT", classifier "License :: OSI Approved :: MIT License");
the LICENSE in its dist-info is the Apache License 2.0 text, with no copyright line filled in.  Both permit this copy.
Copied: verbatim from the PyPI wheel retro-pytorch==0.3.9 (pip download --no-deps): retro_pytorch.py lines 1 and 3-5
(imports), 14-27 (helper functions), 104-113 (rotate_half, apply_rotary_pos_emb) and 134-234 (class Attention,
whole), compared by program with the unpacked wheel.  Left out: line 7 (`from retro_pytorch.retrieval import
BERT_VOCAB_SIZE`, the retrieval module's constant), line 8 `from einops import rearrange, repeat` (the shim below),
everything else (norms, feed-forward, chunked cross-attention, encoder, decoder, RETRO).  ADDED: the einops shim
(the real einops when installed), the factory build(d_model, num_heads, context_length=None) at the end -
Attention(dim=d_model, dim_head=d_model // num_heads, heads=num_heads, causal=True), the decoder's self-attention
with the lesson's head width - and this entry's constants.
Truth: correct (in _truth.py): build(12, 3) = mha_forward with to_q, to_k, to_v, to_out (its bias; no q/k/v bias),
exactly, and a per-head loop; no leak.  The head width is the dim_head argument: nothing needs d_model to divide.
"""
from functools import partial
import torch
import torch.nn.functional as F
from torch import nn, einsum

# --- added for the zoo: a shim for `from einops import rearrange, repeat` (the real einops when installed) ---
try:
    from einops import rearrange, repeat
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == 'b n (h d) -> b h n d':
            b, n, hd = t.shape
            return t.reshape(b, n, axes['h'], hd // axes['h']).permute(0, 2, 1, 3)
        if pattern == 'b h n d -> b n (h d)':
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        if pattern == 'b j -> b 1 1 j':
            return t.reshape(t.shape[0], 1, 1, t.shape[1])
        if pattern == '... (j d) -> ... j d':
            return t.reshape(*t.shape[:-1], axes['j'], t.shape[-1] // axes['j'])
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')

    def repeat(t, pattern, **axes):
        if pattern == '(h d) -> b h 1 d':
            h = axes['h']
            return t.reshape(1, h, 1, t.shape[0] // h).expand(axes['b'], h, 1, t.shape[0] // h)
        raise NotImplementedError(f'repeat shim: pattern {pattern!r} not supported')
# --- end of the added shim ---

# helper functions

def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d

def divisible_by(val, divisor):
    return (val / divisor).is_integer()

def cast_tuple(val, num = 1):
    return val if isinstance(val, tuple) else ((val,) * num)


def rotate_half(x):
    x = rearrange(x, '... (j d) -> ... j d', j = 2)
    x1, x2 = x.unbind(dim = -2)
    return torch.cat((-x2, x1), dim = -1)

def apply_rotary_pos_emb(t, freqs):
    seq_len, rot_dim = t.shape[-2], freqs.shape[-1]
    t, t_pass = t[..., :rot_dim], t[..., rot_dim:]
    t = (t * freqs.cos()) + (rotate_half(t) * freqs.sin())
    return torch.cat((t, t_pass), dim = -1)

class Attention(nn.Module):
    def __init__(
        self,
        dim,
        *,
        context_dim = None,
        dim_head = 64,
        heads = 8,
        causal = False,
        dropout = 0.,
        null_kv = False
    ):
        super().__init__()
        context_dim = default(context_dim, dim)

        self.heads = heads
        self.scale = dim_head ** -0.5
        self.causal = causal
        inner_dim = dim_head * heads

        self.dropout = nn.Dropout(dropout)

        self.to_q = nn.Linear(dim, inner_dim, bias = False)
        self.to_k = nn.Linear(context_dim, inner_dim, bias = False)
        self.to_v = nn.Linear(context_dim, inner_dim, bias = False)
        self.to_out = nn.Linear(inner_dim, dim)

        # allowing for attending to nothing (null function)
        # and to save attention from breaking if all retrieved chunks are padded out
        self.null_k = nn.Parameter(torch.randn(inner_dim)) if null_kv else None
        self.null_v = nn.Parameter(torch.randn(inner_dim)) if null_kv else None

    def forward(self, x, mask = None, context = None, pos_emb = None):
        b, device, h, scale = x.shape[0], x.device, self.heads, self.scale

        kv_input = default(context, x)

        q, k, v = self.to_q(x), self.to_k(kv_input), self.to_v(kv_input)

        # split heads

        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, k, v))

        # scale

        q = q * scale

        # apply relative positional encoding (rotary embeddings)

        if exists(pos_emb):
            q_pos_emb, k_pos_emb = cast_tuple(pos_emb, num = 2)

            q = apply_rotary_pos_emb(q, q_pos_emb)
            k = apply_rotary_pos_emb(k, k_pos_emb)

        # add null key / values

        if exists(self.null_k):
            nk, nv = self.null_k, self.null_v
            nk, nv = map(lambda t: repeat(t, '(h d) -> b h 1 d', b = b, h = h), (nk, nv))
            k = torch.cat((nk, k), dim = -2)
            v = torch.cat((nv, v), dim = -2)

        # derive query key similarities

        sim = einsum('b h i d, b h j d -> b h i j', q, k)

        # masking

        mask_value = -torch.finfo(sim.dtype).max

        if exists(mask):
            if exists(self.null_k):
                mask = F.pad(mask, (1, 0), value = True)

            mask = rearrange(mask, 'b j -> b 1 1 j')
            sim = sim.masked_fill(~mask, mask_value)

        if self.causal:
            i, j = sim.shape[-2:]
            causal_mask = torch.ones(i, j, device = device, dtype = torch.bool).triu(j - i + 1)
            sim = sim.masked_fill(causal_mask, mask_value)

        # attention

        attn = sim.softmax(dim = -1)

        attn = self.dropout(attn)

        # aggregate

        out = einsum('b h i j, b h j d -> b h i d', attn, v)

        # merge heads

        out = rearrange(out, 'b h n d -> b n (h d)')

        # combine heads linear out

        return self.to_out(out)

# --- added (not in the package) ---
def build(d_model, num_heads, context_length=None):
    """The decoder's self-attention (causal=True), heads of width d_model // num_heads."""
    return Attention(dim=d_model, dim_head=d_model // num_heads, heads=num_heads, causal=True)
# --- end of the added part ---
# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("self-and-cross-in-one-class", "keyword-only-ctor", "head-dim-argument", "einops-split", "q-pre-scaled",
             "fill-finfo-max", "causal-flag", "no-qkv-bias")
FORWARD = "x, mask=None, context=None, pos_emb=None"
NOTES = ("Attention(dim, *, context_dim=None, dim_head=64, heads=8, causal=False, dropout=0., null_kv=False); "
         "TARGET is the added factory build(d_model, num_heads, context_length=None).")
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = ("the decoder's causal self-attention is the lesson's layer (to_q, to_k, to_v, to_out); the head "
                    "width is an argument, and the factory's d_model // num_heads refuses nothing: for d=8 with 3 "
                    "heads 6 of the 8 features are used")
