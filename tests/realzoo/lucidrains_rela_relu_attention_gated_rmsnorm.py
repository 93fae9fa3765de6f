"""rela-transformer 0.0.7's ReLA: rectified linear attention (Zhang, Titov, Sennrich 2021, "Sparse Attention with
Linear Units") - the softmax replaced by relu(q k^T / sqrt(dh)), the future zeroed AFTER the relu by
`masked_fill(triu, 0.)`, a gated RMS norm on the input and another on each head's output, learned memory key/value
slots (none by default), one fused bias-free to_qkv and to_out with a bias; keyword-only ReLA(*, dim, causal=True,
dim_head=64, heads=8, num_memory_kv=0, relu_squared=False); forward(x, mask=None) with a (b, j) key-padding mask.

Source: https://github.com/lucidrains/rela-transformer (rela-transformer 0.0.7 on PyPI, the distribution's Home-page),
file rela_transformer/rela_transformer.py as released in rela-transformer 0.0.7.
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2022 Phil Wang").
Copied: verbatim from the PyPI wheel rela-transformer==0.0.7 (pip download --no-deps): lines 1-3 of
rela_transformer/rela_transformer.py (imports; line 4, `from einops import rearrange, repeat`, is replaced by the
shim), lines 6-29 (exists, GatedRMSNorm) and lines 38-101 (ReLA).  Left out: FeedForward and ReLATransformer.
ADDED: a shim for `from einops import rearrange, repeat` (the four patterns the copied code uses; real einops when
installed) and this entry's constants.
Truth: causal (position t never moves with tokens after t), but not the lesson's layer by design: no softmax (relu of
the scaled scores, unnormalised), the input and each head's output normalised by GatedRMSNorm.  With both norms made
the identity it is exactly sum_j<=t relu(q_t . k_j / sqrt(dh)) v_j per head, projected - an independent formula in
_truth.py; mha_forward with the same projections differs by O(1).  Not a bug of the package (it is the paper's layer);
against the lesson's contract a different layer, so a failure with no catalogued mistake named.
"""
import torch
import torch.nn.functional as F
from torch import nn, einsum

# --- added for the zoo: a shim for `from einops import rearrange, repeat` (the real einops when installed) ---
try:
    from einops import rearrange, repeat
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == "b n (h d) -> b h n d":
            b, n, hd = t.shape
            h = axes["h"]
            return t.reshape(b, n, h, hd // h).permute(0, 2, 1, 3)
        if pattern == "b h n d -> b n (h d)":
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        if pattern == "b j -> b 1 1 j":
            return t[:, None, None, :]
        raise NotImplementedError(f"rearrange shim: pattern {pattern!r} not supported")

    def repeat(t, pattern, **axes):
        if pattern == "n d -> b n d":
            return t.unsqueeze(0).expand(axes["b"], *t.shape)
        raise NotImplementedError(f"repeat shim: pattern {pattern!r} not supported")
# --- end of shim; copied blocks follow ---

TARGET = "ReLA"
TRUTH = "bug"
BUG = "relu-not-softmax"
RULE_GAPS = ("keyword-only-constructor", "head-dim-argument", "norm-inside", "no-context-length", "key-padding-mask")
FORWARD = "x, mask=None"
NOTES = ("ReLA(*, dim, causal=True, dim_head=64, heads=8, num_memory_kv=0, relu_squared=False); forward(x, mask=None) "
         "-> (b, n, dim); relu attention, not softmax, by design (the paper's layer), with GatedRMSNorm on the input "
         "and on each head's output.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("causal, but relu attention with two RMS norms is not the lesson's softmax layer: the reference "
                    "comparison fails, and no catalogued mistake (a single slip in the lesson's layer) explains it")

# helper functions

def exists(val):
    return val is not None

# classes

class GatedRMSNorm(nn.Module):
    def __init__(
        self,
        dim,
        eps = 1e-8
    ):
        super().__init__()
        self.scale = dim ** -0.5
        self.eps = eps
        self.w = nn.Parameter(torch.ones(dim))
        self.g = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        norm = torch.norm(x, dim = -1, keepdim = True) * self.scale
        normed_x = x / norm.clamp(min = self.eps) * self.g
        return normed_x * (x * self.w).sigmoid()


class ReLA(nn.Module):
    def __init__(
        self,
        *,
        dim,
        causal = True,
        dim_head = 64,
        heads = 8,
        num_memory_kv = 0,
        relu_squared = False
    ):
        super().__init__()
        self.heads = heads
        inner_dim = dim_head * heads
        self.scale = dim_head ** -0.5
        self.causal = causal
        self.relu_squared = relu_squared
        self.norm = GatedRMSNorm(dim)

        self.to_qkv = nn.Linear(dim, inner_dim * 3, bias = False)

        self.mem_k = nn.Parameter(torch.randn(num_memory_kv, inner_dim))
        self.mem_v = nn.Parameter(torch.randn(num_memory_kv, inner_dim))

        self.norm_values = GatedRMSNorm(dim_head)
        self.to_out = nn.Sequential(
            nn.Linear(inner_dim, dim),
        )

    def forward(self, x, mask = None):
        b, device = x.shape[0], x.device
        x = self.norm(x)
        h = self.heads

        q, k, v = self.to_qkv(x).chunk(3, dim = -1)

        mem_k, mem_v = map(lambda t: repeat(t, 'n d -> b n d', b = b), (self.mem_k, self.mem_v))
        k = torch.cat((mem_k, k), dim = 1)
        v = torch.cat((mem_v, v), dim = 1)

        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, k, v))

        q = q * self.scale
        sim = einsum('b h i d, b h j d -> b h i j', q, k)

        attn = F.relu(sim)

        if self.relu_squared:
            attn = attn ** 2

        if exists(mask):
            mask = rearrange(mask, 'b j -> b 1 1 j')
            attn = attn.masked_fill(~mask, 0.)

        if self.causal:
            i, j = attn.shape[-2:]
            causal_mask = torch.ones(i, j, device = device).triu_(j - i + 1).bool()
            attn = attn.masked_fill(causal_mask, 0.)

        out = einsum('b h i j, b h j d -> b h i d', attn, v)
        out = self.norm_values(out)

        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out)
