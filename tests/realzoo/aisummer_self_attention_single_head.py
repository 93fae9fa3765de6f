"""SelfAttention of The-AI-Summer/self-attention-cv: ONE head, no output projection (the CS224n/course style), one fused `to_qvk` laid out (d k) - q, k and v interleaved feature by feature - scale dim**-0.5, a (n, n) True-is-masked mask.

Source: https://github.com/The-AI-Summer/self-attention-cv/blob/e84780801f16504979a825c100c87f9928bff4fe/self_attention_cv/transformer_vanilla/self_attention.py (commit "msa transformer", 2021-02-17, which also restored `x.dim()` here after the dim -> dim_head rename of d61aad0; unchanged to HEAD 5246e55).
Licence: MIT (Copyright (c) 2021 AI Summer), LICENSE at the repository root.
Copied: verbatim (the whole module, character for character with the index's copy at the cited commit (read_file) and with `git show e847808:self_attention_cv/transformer_vanilla/self_attention.py` in the fetched history), except its import `from einops import rearrange`, replaced by a `rearrange` shim ABOVE the copied block for the one pattern the module uses ('b t (d k) -> k b t d ' with k=3, by reshape/permute); the real einops is used when installed. _truth.py checks the shim against the index formula.
Truth: correct causal single-head attention when called as m(x, mask) with a boolean (n, n) mask, True above the diagonal: to_qvk Linear(dim, 3*dim, bias=False) whose output feature f = d*3 + j holds element d of q (j=0), k (j=1) or v (j=2) - W_q is rows 0, 3, 6, ... - scores q k^T * dim**-0.5 (einsum), masked_fill(mask, -inf) (mask asserted to be exactly (n, n)), softmax(-1), attention @ v. No output projection, as the lesson's single-head CausalAttention; d_in = d_out = dim; no context length. Not causal without the mask.
"""
import numpy as np
import torch
from torch import nn

# --- shim: einops.rearrange for the one pattern used below (real einops is used when it is installed) ---
try:
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern.replace(' ', '') == 'bt(dk)->kbtd':  # the last axis is laid out d-major, then k (q/k/v): index = d*K + k
            b, n, dk = t.shape
            k = axes['k']
            return t.reshape(b, n, dk // k, k).permute(3, 0, 1, 2)
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')
# --- end of shim; copied block follows ---

TARGET = "SelfAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("single-head", "no-output-projection", "fused-qkv-interleaved-per-element", "causal-only-with-mask-argument",
             "no-context-length")
FORWARD = "x, mask=None"
NOTES = ("Constructor SelfAttention(dim): one head, d_in = d_out = dim. forward(x, mask=None): mask bool (n, n), True = "
         "masked. to_qvk.weight (3*dim, dim) rows ordered (d, j): q, k, v interleaved row by row; no biases, no output "
         "projection. Needs einops (shim included).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ('the single-head form (one head, no output projection), correct once its interleaved fused layout is read '
                    'and the (n, n) True-is-masked mask passed, as rasbt_ch03_causal_attention.py')


class SelfAttention(nn.Module):
    """
    Implementation of plain self attention mechanism with einsum operations
    Paper: https://arxiv.org/abs/1706.03762
    Blog: https://theaisummer.com/transformer/
    """

    def __init__(self, dim):
        """
        Args:
            dim: for NLP it is the dimension of the embedding vector
            the last dimension size that will be provided in forward(x)
            where x is a 3D tensor
        """
        super().__init__()
        self.to_qvk = nn.Linear(dim, dim * 3, bias=False)
        self.scale_factor = dim ** -0.5  # 1/np.sqrt(dim)

    def forward(self, x, mask=None):
        assert x.dim() == 3, '3D tensor must be provided'
        qkv = self.to_qvk(x)  # [batch, tokens, dim*3 ]

        # decomposition to q,v,k
        # rearrange tensor to [3, batch, tokens, dim] and cast to tuple
        q, k, v = tuple(rearrange(qkv, 'b t (d k) -> k b t d ', k=3))

        # Resulting shape: [batch, tokens, tokens]
        scaled_dot_prod = torch.einsum('b i d , b j d -> b i j', q, k) * self.scale_factor

        if mask is not None:
            assert mask.shape == scaled_dot_prod.shape[1:]
            scaled_dot_prod = scaled_dot_prod.masked_fill(mask, -np.inf)

        attention = torch.softmax(scaled_dot_prod, dim=-1)
        return torch.einsum('b i j , b j d -> b i d', attention, v)
