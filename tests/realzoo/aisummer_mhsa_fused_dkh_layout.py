"""MultiHeadSelfAttention of The-AI-Summer/self-attention-cv (fixed): one fused `to_qvk` whose output is laid out (d k h) - head width outermost, then q/k/v, then the head - so q, k and v are interleaved element by element; einsum attention, dim_head argument, no biases, a (n, n) True-is-masked mask.

Source: https://github.com/The-AI-Summer/self-attention-cv/blob/ffdb618e892ede8d600ffbe1023743ab059e599c/self_attention_cv/transformer_vanilla/mhsa.py (commit "spacetime attention block reimplemented", 2021-02-22; unchanged to HEAD 5246e55).
Licence: MIT (Copyright (c) 2021 AI Summer), LICENSE at the repository root.
Copied: verbatim (the whole module, character for character with the index's copy at the cited commit (read_file) and with `git show <commit>:self_attention_cv/transformer_vanilla/mhsa.py` in the fetched history (mirror HEAD 5246e55, 2021-09-14)), except its import `from einops import rearrange`, replaced by a `rearrange` shim ABOVE the copied block that implements exactly the two patterns the module uses with reshape/permute ('b t (d k h ) -> k b h t d ' with k=3, h=heads, and 'b h t d -> b t (h d)'); the real einops is used when installed (it is not in the project's venv). _truth.py checks the shim against an element-by-element index formula.
Truth: correct causal MHA (ViT-style layer, causal only with a mask) when called as m(x, mask) with a boolean (n, n) mask, True above the diagonal: to_qvk Linear(dim, 3*H*dh, bias=False) whose output feature f = (d*3 + j)*H + h holds element d of head h of q (j=0), k (j=1) or v (j=2) - so W_q of head h, element d is row (3d)H + h, not a block of rows; scores q k^T * dh**-0.5 (einsum), masked_fill(mask, -inf) (mask must be exactly (n, n): asserted), softmax(-1), merge 'b h t d -> b t (h d)', W_0 Linear(H*dh, dim, bias=False). The head width is dim_head if given, else int(dim / heads) (no divisibility check: dim=8, heads=3 builds heads of width 2 and W_0 6 -> 8). No output-projection bias. Not causal without the mask.
"""
import numpy as np
import torch
from torch import nn

# --- shim: einops.rearrange for the two patterns used below (real einops is used when it is installed) ---
try:
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        p = pattern.replace(' ', '')
        if p == 'bt(dkh)->kbhtd':  # the last axis is laid out d-major, then k (q/k/v), then h: index = (d*K + k)*H + h
            b, n, dkh = t.shape
            k, h = axes['k'], axes['h']
            return t.reshape(b, n, dkh // (k * h), k, h).permute(3, 0, 4, 1, 2)
        if p == 'bhtd->bt(hd)':
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')
# --- end of shim; copied block follows ---

TARGET = "MultiHeadSelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("fused-qkv-interleaved-per-element", "no-out-proj-bias", "no-divisibility-check", "head-dim-argument",
             "causal-only-with-mask-argument")
FORWARD = "x, mask=None"
NOTES = ("Constructor MultiHeadSelfAttention(dim, heads=8, dim_head=None). forward(x, mask=None): mask bool (n, n), True = "
         "masked (asserted to be exactly (n, n)). to_qvk.weight (3*H*dh, dim) rows ordered (d, j, h): q/k/v and heads "
         "interleaved row by row; W_0 (dim, H*dh), no biases. Needs einops (shim included).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = None
EXPECTED_BECAUSE = ('correct math once its element-interleaved fused layout is read and a (n, n) True-is-masked mask passed; '
                    'two lesson rules not followed (divisibility, output bias): no single mistake to name')


def compute_mhsa(q, k, v, scale_factor=1, mask=None):
    # resulted shape will be: [batch, heads, tokens, tokens]
    scaled_dot_prod = torch.einsum('... i d , ... j d -> ... i j', q, k) * scale_factor

    if mask is not None:
        assert mask.shape == scaled_dot_prod.shape[2:]
        scaled_dot_prod = scaled_dot_prod.masked_fill(mask, -np.inf)

    attention = torch.softmax(scaled_dot_prod, dim=-1)
    # calc result per head
    return torch.einsum('... i j , ... j d -> ... i d', attention, v)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, dim, heads=8, dim_head=None):
        """
        Implementation of multi-head attention layer of the original transformer model.
        einsum and einops.rearrange is used whenever possible
        Args:
            dim: token's dimension, i.e. word embedding vector size
            heads: the number of distinct representations to learn
            dim_head: the dim of the head. In general dim_head<dim.
            However, it may not necessary be (dim/heads)
        """
        super().__init__()
        self.dim_head = (int(dim / heads)) if dim_head is None else dim_head
        _dim = self.dim_head * heads
        self.heads = heads
        self.to_qvk = nn.Linear(dim, _dim * 3, bias=False)
        self.W_0 = nn.Linear(_dim, dim, bias=False)
        self.scale_factor = self.dim_head ** -0.5

    def forward(self, x, mask=None):
        assert x.dim() == 3
        qkv = self.to_qvk(x)  # [batch, tokens, dim*3*heads ]

        # decomposition to q,v,k and cast to tuple
        # the resulted shape before casting to tuple will be: [3, batch, heads, tokens, dim_head]
        q, k, v = tuple(rearrange(qkv, 'b t (d k h ) -> k b h t d ', k=3, h=self.heads))

        out = compute_mhsa(q, k, v, mask=mask, scale_factor=self.scale_factor)

        # re-compose: merge heads with dim_head
        out = rearrange(out, "b h t d -> b t (h d)")
        # Apply final linear transformation layer
        return self.W_0(out)
