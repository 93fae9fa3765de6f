"""MultiHeadSelfAttention of The-AI-Summer/self-attention-cv after the rename "dim -> dim_head" went one word too far: forward asserts `x.dim_head() == 3`, which no tensor has - every call raises.

Source: https://github.com/The-AI-Summer/self-attention-cv/blob/1c9bf6c091da998fbe84b4cfe4b8f17adf8c5c58/self_attention_cv/transformer_vanilla/mhsa.py (commit "bottleneck MHSA module and update readme", 2021-02-11; the line came in with d61aad0 "fix: simplify axial att params", 2021-02-10).
Licence: MIT (Copyright (c) 2021 AI Summer), LICENSE at the repository root.
Copied: verbatim (the whole module, character for character with the index's copy at the cited commit (read_file) and with `git show <commit>:self_attention_cv/transformer_vanilla/mhsa.py` in the fetched history (mirror HEAD 5246e55, 2021-09-14)), except its import `from einops import rearrange`, replaced by a `rearrange` shim ABOVE the copied block that implements exactly the two patterns the module uses with reshape/permute ('b t (d k h ) -> k b h t d ' with k=3, h=heads, and 'b h t d -> b t (h d)'); the real einops is used when installed (it is not in the project's venv). _truth.py checks the shim against an element-by-element index formula.
Truth: BUG, the forward cannot run: `assert x.dim_head() == 3` raises AttributeError ('Tensor' object has no attribute 'dim_head') for every input, before any attention is computed; everything after it is the fixed version's layer (see aisummer_mhsa_fused_dkh_layout.py). Evidence: fix commit https://github.com/The-AI-Summer/self-attention-cv/commit/3e159b9 ("add minimal implementation for ViT vision transformer", 2021-02-12: `x.dim_head()` -> `x.dim()`), and _truth.py (every call raises; with the one word restored the same weights give the correct layer).
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
TRUTH = "bug"
BUG = "forward-always-raises"
RULE_GAPS = ("no-out-proj-bias", "no-divisibility-check", "head-dim-argument", "causal-only-with-mask-argument")
FORWARD = "x, mask=None"
NOTES = ("Constructor MultiHeadSelfAttention(dim, heads=8, dim_head=None). forward(x, mask=None) raises AttributeError at its "
         "first line whatever x is. Needs einops (shim included).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = "the forward raises AttributeError ('Tensor' object has no attribute 'dim_head') on every input: the student's own code, not a limit of ours"


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
        assert x.dim_head() == 3
        qkv = self.to_qvk(x)  # [batch, tokens, dim*3*heads ]

        # decomposition to q,v,k and cast to tuple
        # the resulted shape before casting to tuple will be: [3, batch, heads, tokens, dim_head]
        q, k, v = tuple(rearrange(qkv, 'b t (d k h ) -> k b h t d ', k=3, h=self.heads))

        # resulted shape will be: [batch, heads, tokens, tokens]
        scaled_dot_prod = torch.einsum('b h i d , b h j d -> b h i j', q, k) * self.scale_factor

        if mask is not None:
            assert mask.shape == scaled_dot_prod.shape[2:]
            scaled_dot_prod = scaled_dot_prod.masked_fill(mask, -np.inf)

        attention = torch.softmax(scaled_dot_prod, dim=-1)
        # calc result per head
        out = torch.einsum('b h i j , b h j d -> b h i d', attention, v)
        # re-compose: merge heads with dim_head
        out = rearrange(out, "b h t d -> b t (h d)")
        # Apply final linear transformation layer
        return self.W_0(out)
