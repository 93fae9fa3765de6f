"""lucidrains' Memorizing Transformers: the local Attention of the non-KNN layers - MULTI-QUERY (to_q Linear(dim,
heads * dim_head) without bias, ONE key/value head from to_kv Linear(dim, 2 * dim_head) chunked in two), keyword-only
constructor (dim, heads=8, dim_head=64, dropout=0., xl_max_memories=0.), einops for the queries only, einsum
'b h i d, b j d -> b h i j' (keys shared by every head), q pre-scaled by dim_head ** -0.5, ALWAYS causal:
triu(j - i + 1) filled with -finfo.max (offset for the memories), an optional relative position bias added to the
scores, to_out with bias; forward(x, *, xl_memory=None, rel_pos_bias=None) takes a Transformer-XL memory of past
keys and values (b, m, 2, dim_head) concatenated before the new ones - a KV cache - and returns a TUPLE (out,
new_xl_kv_memories), the memories the last xl_max_memories (k, v) pairs (None when xl_max_memories is 0).  The model
wraps it in PreNormResidual: no normalisation inside.

Source: https://github.com/lucidrains/memorizing-transformers-pytorch (the wheel's METADATA Home-page), file
memorizing_transformers_pytorch/memorizing_transformers_pytorch.py as released in memorizing-transformers-pytorch
0.4.1 on PyPI.
Licence: MIT ("Copyright (c) 2022 Phil Wang", LICENSE in the wheel's dist-info; METADATA "License: MIT").
Copied: verbatim from the PyPI wheel memorizing-transformers-pytorch==0.4.1 (pip download --no-deps), every copied
line compared by program with the unpacked wheel: lines 7-9 (torch imports), 22-23 (exists) and 112-171 (class
Attention, whole).  Left out: lines 1-5 and 12-15 (math, functools, contextlib, pathlib, filelock, einops_exts,
einops' Rearrange, the KNN memory: used by the file's other classes) and line 11 `from einops import rearrange,
repeat` (the shim below: the real rearrange when installed).  ADDED: the einops shim, the factory `build` at the end
(dim_head = d_model // num_heads; xl_max_memories left at its default 0, as MemorizingTransformer's), this docstring
and the entry's constants.
Truth: correct (in _truth.py): build(12, 3) in eval() = gqa_forward with one kv head (to_q, to_kv's two row halves as
W_k and W_v, to_out with its bias) and the one-kv-head loop, exactly; no leak; with xl_max_memories=10, tokens fed
4 + 1 + 2 through the returned memories give the whole forward's outputs (the causal offset triu(j - i + 1) holds for
a chunk of 2).
"""
import torch
import torch.nn.functional as F
from torch import nn, einsum
try:  # added for the zoo: einops' rearrange, or a shim for the two patterns the copied class uses
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == 'b n (h d) -> b h n d':
            b, n, hd = t.shape
            return t.reshape(b, n, axes['h'], hd // axes['h']).transpose(1, 2)
        if pattern == 'b h n d -> b n (h d)':
            b, h, n, d = t.shape
            return t.transpose(1, 2).reshape(b, n, h * d)
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')

def exists(val):
    return val is not None

class Attention(nn.Module):
    def __init__(
        self,
        *,
        dim,
        heads = 8,
        dim_head = 64,
        dropout = 0.,
        xl_max_memories = 0.,
    ):
        super().__init__()
        self.heads = heads
        self.scale = dim_head ** -0.5
        inner_dim = heads * dim_head
        self.xl_max_memories = xl_max_memories

        self.dropout = nn.Dropout(dropout)

        self.to_q = nn.Linear(dim, inner_dim, bias = False)
        self.to_kv = nn.Linear(dim, dim_head * 2, bias = False)
        self.to_out = nn.Linear(inner_dim, dim)

    def forward(self, x, *, xl_memory = None, rel_pos_bias = None):
        h, device = self.heads, x.device
        q, k, v = (self.to_q(x), *self.to_kv(x).chunk(2, dim = -1))

        q = rearrange(q, 'b n (h d) -> b h n d', h = h)

        q = q * self.scale

        if exists(xl_memory):
            k_xl_mem, v_xl_mem = xl_memory.unbind(dim = -2)
            k = torch.cat((k_xl_mem, k), dim = -2)
            v = torch.cat((v_xl_mem, v), dim = -2)

        sim = einsum('b h i d, b j d -> b h i j', q, k)
        i, j = sim.shape[-2:]

        if exists(rel_pos_bias):
            sim = rel_pos_bias[..., -i:, -j:] + sim

        causal_mask = torch.ones((i, j), dtype = torch.bool, device = device).triu(j - i + 1)
        sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)

        attn = sim.softmax(dim = -1)
        attn = self.dropout(attn)

        out = einsum('b h i j, b j d -> b h i d', attn, v)
        out = rearrange(out, 'b h n d -> b n (h d)')

        # new xl memories

        new_kv_memories = torch.stack((k, v), dim = -2).detach()

        if self.xl_max_memories > 0:
            new_xl_kv_memories = new_kv_memories[:, -self.xl_max_memories:]
        else:
            new_xl_kv_memories = None

        return self.to_out(out), new_xl_kv_memories


def build(d_model, num_heads, context_length=None):  # added for the zoo
    return Attention(dim=d_model, heads=num_heads, dim_head=d_model // num_heads)


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("multi-query-one-kv-head", "keyword-only-constructor", "einsum", "finfo-max-fill", "q-prescaled",
             "xl-memory-kv-cache", "tuple-output")
FORWARD = "x, *, xl_memory=None, rel_pos_bias=None"
NOTES = ("build(d_model, num_heads) = Attention(dim=d_model, heads=num_heads, dim_head=d_model // num_heads); "
         "forward(x) -> (out (B, n, d_model), None).")
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = ("the lesson's math with one key/value head (read as multi-query), causal always; the class takes "
                    "dim_head and heads, so nothing refuses a width the heads do not divide (as RETRO's entry)")
