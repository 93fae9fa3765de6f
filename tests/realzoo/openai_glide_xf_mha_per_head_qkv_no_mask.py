"""GLIDE's (openai/glide-text2im) text-transformer attention: MultiheadAttention(n_ctx, width, heads) = c_qkv, a separate QKVMultiheadAttention(n_heads, n_ctx) module holding no parameters, and c_proj; the fused qkv is viewed (B, n, H, -1) and split per head ([q_h; k_h; v_h] rows, the Megatron layout), q and k are EACH scaled by attn_ch**-0.25 before one einsum, the softmax runs in float32, and there is NO mask: every token sees every other (GLIDE encodes its caption bidirectionally).

Source: https://github.com/openai/glide-text2im/blob/69b530740eb6cef69442d6180579ef5ba9ef063e/glide_text2im/xf.py (unchanged since the first commit 1f791b8, 2021-12-20; the file says it is "adapted from CLIP ViT").
Licence: MIT (Copyright (c) 2021 OpenAI), LICENSE at the repository root.
Copied: verbatim from `git show 69b5307:glide_text2im/xf.py` in the fetched history: the imports (`import math`, `import torch as th`, `import torch.nn as nn`) and the classes MultiheadAttention and QKVMultiheadAttention. The file's docstring is quoted above instead of copied; convert_module_to_f16, LayerNorm, MLP, ResidualAttentionBlock and Transformer are left out. ADDED: this entry's constants after the imports.
Truth: = mha_forward's layer WITHOUT its causal mask, with W_q, W_k, W_v the per-head rows of c_qkv (head h: rows 3*h*dh .. for q, then k, then v), the scale attn_ch**-0.25 on q and on k (= 1/sqrt(dh) on the scores), c_proj as W_o, to the precision of its float32 softmax (relative 1e-7). So the math of the lesson's layer in the per-head fused layout, but bidirectional: position t depends on later tokens. Not a bug in GLIDE (its text encoder is meant to be bidirectional) - in a causal layer it is the missing mask; n_ctx is stored and never used.
"""
import math

import torch as th
import torch.nn as nn

TARGET = "MultiheadAttention"
TRUTH = "bug"
BUG = "no causal mask (a bidirectional text encoder's attention; by design in GLIDE)"
RULE_GAPS = ("not-causal", "qkv-per-head-interleaved", "inner-attention-module", "q-and-k-scaled-by-dh-quarter-power",
             "float32-softmax", "no-divisibility-check", "context-length-unused")
FORWARD = "x"
NOTES = ("MultiheadAttention(n_ctx, width, heads). forward(x) -> (B, n, width). Weights c_qkv (3 * width, width), "
         "c_proj (width, width), both with bias; attention = QKVMultiheadAttention(heads, n_ctx), no parameters.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'no-mask'
EXPECTED_BECAUSE = "the lesson's math in the per-head fused layout with no causal mask at all: the future leaks, the no-mask mistake exactly"

class MultiheadAttention(nn.Module):
    def __init__(self, n_ctx, width, heads):
        super().__init__()
        self.n_ctx = n_ctx
        self.width = width
        self.heads = heads
        self.c_qkv = nn.Linear(width, width * 3)
        self.c_proj = nn.Linear(width, width)
        self.attention = QKVMultiheadAttention(heads, n_ctx)

    def forward(self, x):
        x = self.c_qkv(x)
        x = self.attention(x)
        x = self.c_proj(x)
        return x



class QKVMultiheadAttention(nn.Module):
    def __init__(self, n_heads: int, n_ctx: int):
        super().__init__()
        self.n_heads = n_heads
        self.n_ctx = n_ctx

    def forward(self, qkv):
        bs, n_ctx, width = qkv.shape
        attn_ch = width // self.n_heads // 3
        scale = 1 / math.sqrt(math.sqrt(attn_ch))
        qkv = qkv.view(bs, n_ctx, self.n_heads, -1)
        q, k, v = th.split(qkv, attn_ch, dim=-1)
        weight = th.einsum(
            "bthc,bshc->bhts", q * scale, k * scale
        )  # More stable with f16 than dividing afterwards
        wdtype = weight.dtype
        weight = th.softmax(weight.float(), dim=-1).type(wdtype)
        return th.einsum("bhts,bshc->bthc", weight, v).reshape(bs, n_ctx, -1)

