"""OpenCLIP's custom Attention (2022): sequence-first input (L, N, C), one raw fused in_proj_weight Parameter used through F.linear and chunk(3), heads folded into the batch, and an ADDITIVE attn_mask argument (a bool mask is turned into 0 / -inf first), as CLIP's text tower passes it.

Source: https://github.com/mlfoundations/open_clip (the repository the wheel's METADATA names as its home page), file open_clip/transformer.py (class Attention) as released in open-clip-torch 2.7.0 on PyPI (the same class is in open-clip-torch 2.0.2's open_clip/model.py). The text tower's mask is built by TextTransformer.build_attention_mask in the same file: torch.empty(ctx, ctx).fill_(float("-inf")).triu_(1), an additive (n, n) mask.
Licence: MIT-style (the wheel's dist-info LICENSE: "Copyright (c) 2012-2021 Gabriel Ilharco, Mitchell Wortsman, Nicholas Carlini, Rohan Taori, Achal Dave, Vaishaal Shankar, John Miller, Hongseok Namkoong, Hannaneh Hajishirzi, Ali Farhadi, Ludwig Schmidt", followed by the MIT permission notice; its METADATA's classifier says Apache, its LICENSE text is the MIT grant).
Copied: verbatim from the PyPI wheel open-clip-torch==2.7.0 (pip download --no-deps): lines 2-7 of open_clip/transformer.py (the imports math, typing, torch, nn, F; line 1's OrderedDict, line 8's checkpoint and line 10's package-relative `.utils` import are left out) and lines 48-121 (class Attention); every copied line compared by program with the unpacked wheel. This entry's constants are placed after the imports.
Truth: a correct causal multi-head attention for SEQUENCE-FIRST input x of shape (n, B, d) called as m(x, attn_mask) with the additive (n, n) mask (-inf above the diagonal) or a bool one (True = masked): in_proj_weight (3d, d) = [W_q; W_k; W_v] row blocks, in_proj_bias (3d) (qkv_bias=True by default); q, k, v = F.linear(x, W, b).chunk(3); view(L, N * H, dh).transpose(0, 1) (heads folded batch-major, index n * H + h); q * dh**-0.5; bmm; attn += attn_mask; softmax(-1); bmm; transpose(0, 1).reshape(L, N, C); out_proj Linear(d, d). Not causal without the mask argument. A batch-first (B, n, d) input is read as n sequences of length B: the layer then mixes the batch, which is the caller's misuse, not a bug. The scaled_cosine and scale_heads options (off by default) are not exercised (scale_heads would view(N, H, L, C) with C = d, not dh).
"""
import math
from typing import Callable, Optional

import torch
from torch import nn
from torch.nn import functional as F

TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("sequence-first-layout", "raw-fused-in-proj-parameter", "additive-mask-argument", "causal-only-with-mask-argument",
             "no-context-length")
FORWARD = "x, attn_mask=None"
NOTES = ("Attention(dim, num_heads=8, qkv_bias=True, scaled_cosine=False, scale_heads=False, logit_scale_max=math.log(100), "
         "attn_drop=0., proj_drop=0.). forward(x, attn_mask=None) with x (L, N, C) sequence first; attn_mask additive "
         "(L, L) float or bool (True = masked). Parameters in_proj_weight (3C, C), in_proj_bias (3C), out_proj.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ('the lesson\'s layer for sequence-first input (n, B, d) given its mask argument: every rule followed '
                    '(until realzoo7 the masked calls were tried batch first only, and cannot tell was the best it said)')


class Attention(nn.Module):
    def __init__(
            self,
            dim,
            num_heads=8,
            qkv_bias=True,
            scaled_cosine=False,
            scale_heads=False,
            logit_scale_max=math.log(1. / 0.01),
            attn_drop=0.,
            proj_drop=0.
    ):
        super().__init__()
        self.scaled_cosine = scaled_cosine
        self.scale_heads = scale_heads
        assert dim % num_heads == 0, 'dim should be divisible by num_heads'
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.logit_scale_max = logit_scale_max

        # keeping in_proj in this form (instead of nn.Linear) to match weight scheme of original
        self.in_proj_weight = nn.Parameter(torch.randn((dim * 3, dim)) * self.scale)
        if qkv_bias:
            self.in_proj_bias = nn.Parameter(torch.zeros(dim * 3))
        else:
            self.in_proj_bias = None

        if self.scaled_cosine:
            self.logit_scale = nn.Parameter(torch.log(10 * torch.ones((num_heads, 1, 1))))
        else:
            self.logit_scale = None
        self.attn_drop = nn.Dropout(attn_drop)
        if self.scale_heads:
            self.head_scale = nn.Parameter(torch.ones((num_heads, 1, 1)))
        else:
            self.head_scale = None
        self.out_proj = nn.Linear(dim, dim)
        self.out_drop = nn.Dropout(proj_drop)

    def forward(self, x, attn_mask: Optional[torch.Tensor] = None):
        L, N, C = x.shape
        q, k, v = F.linear(x, self.in_proj_weight, self.in_proj_bias).chunk(3, dim=-1)
        q = q.contiguous().view(L, N * self.num_heads, -1).transpose(0, 1)
        k = k.contiguous().view(L, N * self.num_heads, -1).transpose(0, 1)
        v = v.contiguous().view(L, N * self.num_heads, -1).transpose(0, 1)

        if self.logit_scale is not None:
            attn = torch.bmm(F.normalize(q, dim=-1), F.normalize(k, dim=-1).transpose(-1, -2))
            logit_scale = torch.clamp(self.logit_scale, max=self.logit_scale_max).exp()
            attn = attn.view(N, self.num_heads, L, L) * logit_scale
            attn = attn.view(-1, L, L)
        else:
            q = q * self.scale
            attn = torch.bmm(q, k.transpose(-1, -2))

        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                new_attn_mask = torch.zeros_like(attn_mask, dtype=q.dtype)
                new_attn_mask.masked_fill_(attn_mask, float("-inf"))
                attn_mask = new_attn_mask
            attn += attn_mask

        attn = attn.softmax(dim=-1)
        attn = self.attn_drop(attn)

        x = torch.bmm(attn, v)
        if self.head_scale is not None:
            x = x.view(N, self.num_heads, L, C) * self.head_scale
            x = x.view(-1, L, C)
        x = x.transpose(0, 1).reshape(L, N, C)
        x = self.out_proj(x)
        x = self.out_drop(x)
        return x
