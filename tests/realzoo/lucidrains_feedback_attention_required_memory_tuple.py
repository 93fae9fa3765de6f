"""feedback-transformer-pytorch 0.0.11's Attention: the attention of the Feedback Transformer (Fan et al. 2020), a
keyword-only Attention(*, dim, heads=8, dim_head=64, dropout=0.) with bias-free to_q and a fused bias-free to_kv
([W_k; W_v] by chunk(2)), to_out with a bias, q scaled before the scores; forward(x, memory, pos_emb=None) whose
`memory` is REQUIRED: a (keys, values) tuple of already projected memory (b, m, heads * dim_head), or None; the new
tokens' own keys and values are appended only when more than one token comes at once (`self_attend = n > 1`), with a
causal mask offset past the memory and the finite fill -torch.finfo(dtype).max.

Source: https://github.com/lucidrains/feedback-transformer-pytorch (feedback-transformer-pytorch 0.0.11 on PyPI, the
distribution's Home-page), file feedback_transformer_pytorch/feedback_transformer_pytorch.py as released in
feedback-transformer-pytorch 0.0.11.
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2021 Phil Wang").
Copied: verbatim from the PyPI wheel feedback-transformer-pytorch==0.0.11 (pip download --no-deps): lines 1-6 of
feedback_transformer_pytorch/feedback_transformer_pytorch.py (imports; line 7, `from einops import rearrange`, is
replaced by the shim), lines 9-25 (Memory, exists, default, safe_cat) and lines 133-186 (Attention).  Left out:
RelativePositionBias, the other sublayers and FeedbackTransformer, which wraps each Attention in
SkipIf(memory_is_empty) where its segments are one token long.
ADDED: a shim for `from einops import rearrange` (the three patterns the copied code uses; real einops when
installed) and this entry's constants.
Truth: correct given no memory and two or more tokens: forward(x, None) is mha_forward (to_q, the rows of to_kv,
to_out) exactly for n >= 2, no leak (in _truth.py).  With one token and no memory there is nothing to attend to:
k and v stay None and einsum raises (the package never makes that call: its own model skips the layer while the
memory is empty).  The finite fill -finfo.max underflows to exact zeros in softmax, as -inf would.
"""
import math
from collections import namedtuple

import torch
from torch import nn, einsum
import torch.nn.functional as F

# --- added for the zoo: a shim for `from einops import rearrange` (the real einops when installed) ---
try:
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == "b n (h d) -> b h n d":
            b, n, hd = t.shape
            h = axes["h"]
            return t.reshape(b, n, h, hd // h).permute(0, 2, 1, 3)
        if pattern == "b h n d -> b n (h d)":
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        if pattern == "i j -> () () i j":
            return t[None, None]
        raise NotImplementedError(f"rearrange shim: pattern {pattern!r} not supported")
# --- end of shim; copied blocks follow ---

TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("keyword-only-constructor", "head-dim-argument", "required-memory-argument", "no-context-length",
             "finite-fill-finfo-max", "scale-before-scores")
FORWARD = "x, memory, pos_emb=None"
NOTES = ("Attention(*, dim, heads=8, dim_head=64, dropout=0.); forward(x, memory, pos_emb=None) -> (b, n, dim); "
         "memory a (keys, values) tuple or None, required; one token with no memory raises (nothing to attend to).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("forward's `memory` is required and is the layer's state (keys and values of earlier segments): "
                    "mha-check cannot make one, and None works only for two or more tokens, so it cannot tell how "
                    "to call the layer; nothing it can check is wrong (divisibility, a lesson rule, fails: dim_head "
                    "is its own argument)")
# constants

Memory = namedtuple('Memory', ['keys', 'values'])

# helpers

def exists(val):
    return val is not None

def default(val, d):
    return val if exists(val) else d

def safe_cat(arr, el, dim = 1):
    if not exists(arr):
        return el
    return torch.cat((arr, el), dim = dim)


class Attention(nn.Module):
    def __init__(
        self,
        *,
        dim,
        heads = 8,
        dim_head = 64,
        dropout = 0.
    ):
        super().__init__()
        self.heads = heads
        self.scale = dim_head ** -0.5

        inner_dim = dim_head * heads
        self.to_q = nn.Linear(dim, inner_dim, bias = False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias = False)
        self.to_out = nn.Linear(inner_dim, dim)

        self.dropout = nn.Dropout(dropout)

    def forward(self, x, memory, pos_emb = None):
        h, n, device = self.heads, x.shape[1], x.device

        self_attend = n > 1 # only self attend if going at greater than 1 token at a time

        q = self.to_q(x) * self.scale

        k, v = memory if exists(memory) else (None, None)

        if self_attend:
            self_k, self_v = self.to_kv(x).chunk(2, dim = -1)
            k = safe_cat(k, self_k, dim = 1)
            v = safe_cat(v, self_v, dim = 1)

        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, k, v))

        sim = einsum('b h i d, b h j d -> b h i j', q, k)
        i, j = sim.shape[-2:]

        if exists(pos_emb):
            sim = sim + pos_emb(sim)

        if self_attend:
            causal_mask = torch.ones(i, j, device = device).triu_(j - i + 1).bool()
            causal_mask = rearrange(causal_mask, 'i j -> () () i j')
            mask_value = -torch.finfo(q.dtype).max
            sim.masked_fill_(causal_mask, mask_value)

        attn = sim.softmax(dim = -1)
        attn = self.dropout(attn)

        out = einsum('b h i j, b h j d -> b h i d', attn, v)
        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out)
