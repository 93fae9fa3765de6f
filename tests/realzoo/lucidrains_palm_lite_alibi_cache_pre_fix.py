"""PaLM-pytorch's "palm lite" ParallelTransformerBlock as first released: RMSNorm, ONE fused projection split into (queries of all heads, one shared key/value head, the feed-forward input), multi-query attention with ALiBi, a causal mask cached with register_buffer, and the feed-forward added to the attention output - with a CACHING BUG in AlibiPositionalBias: the first call returns the bias, every later call returns qk_sim + bias, so from the second forward on the scores are 2 * sim + bias.

Source: https://github.com/lucidrains/PaLM-pytorch (the repository the wheel's METADATA names), file palm_pytorch/palm_lite.py as released in PaLM-pytorch 0.2.0 on PyPI, the first release holding palm lite. PaLM-pytorch 0.2.1 has the fix: `return qk_sim + self.bias[..., :i, :j]` -> `return self.bias[..., :i, :j]`.
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2022 Phil Wang").
Copied: verbatim from the PyPI wheel PaLM-pytorch==0.2.0 (pip download --no-deps): lines 1-2 and 4-5 of palm_pytorch/palm_lite.py (the torch imports; line 3, `from einops import rearrange, repeat`, is replaced by the shim) and lines 7-180 (helpers exists, RMSNorm, AlibiPositionalBias, Residual, SwiGLU, ParallelTransformerBlock); every copied line compared by program with the unpacked wheel. The PaLM() factory and the __main__ test are left out. ADDED: a shim for `from einops import rearrange, repeat` (the five patterns the copied code uses; real einops when installed) and this entry's constants.
Truth: not the lesson's layer even when right (a whole parallel block: RMSNorm(x), then multi-query attention with ALiBi plus a SwiGLU feed-forward, summed; no residual inside), and BUGGY as released: forward is not a function of its input - the first call computes softmax(sim + alibi) with sim = q . k * dim_head**-0.5, every later call softmax(2 * sim + alibi) (the cached branch adds qk_sim again). Causal in both (mask triu(1), -finfo.max fill). Shown in _truth.py against a written-out per-head reference of both calls.
"""
import torch
import torch.nn.functional as F
# --- added for the zoo: a shim for `from einops import rearrange, repeat` (the real einops when installed) ---
try:
    from einops import rearrange, repeat
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == 'h -> h 1 1':
            return t.reshape(-1, 1, 1)
        if pattern == 'j -> 1 1 j':
            return t.reshape(1, 1, -1)
        if pattern == 'i -> 1 i 1':
            return t.reshape(1, -1, 1)
        if pattern == "b n (h d) -> b h n d":
            b, n, hd = t.shape
            h = axes["h"]
            return t.reshape(b, n, h, hd // h).permute(0, 2, 1, 3)
        if pattern == "b h n d -> b n (h d)":
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        raise NotImplementedError(f"rearrange shim: pattern {pattern!r} not supported")
    repeat = None  # imported by the original, not used by the copied code
# --- end of shim ---
from torch import einsum, nn
from math import log2, floor

TARGET = "ParallelTransformerBlock"
TRUTH = "bug"
BUG = "ALiBi cache returns qk_sim + bias: the second and later forwards double the scores"
RULE_GAPS = ("whole-block-not-attention", "feed-forward-inside", "rmsnorm-inside", "multi-query", "alibi",
             "head-dim-argument", "no-biases", "no-context-length")
FORWARD = "x"
NOTES = ("ParallelTransformerBlock(dim, dim_head=64, heads=8, ff_mult=4). forward(x). Weights norm.g, fused_attn_ff_proj "
         "(heads * dim_head + dim_head + 2 * ff_mult * dim, dim) split (q, one kv head used as both k and v, ff), attn_out, "
         "ff_out.1; buffers alibi slopes, bias and mask (None until the first forward).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'the same input gives another output from the second call on (eval-determinism), whatever the block computes'



def exists(val):
    return val is not None

# normalization

class RMSNorm(nn.Module):
    def __init__(self, dim, eps = 1e-8):
        super().__init__()
        self.scale = dim ** -0.5
        self.eps = eps
        self.g = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        norm = torch.norm(x, dim = -1, keepdim = True) * self.scale
        return x / norm.clamp(min = self.eps) * self.g

# AliBi

class AlibiPositionalBias(nn.Module):
    def __init__(self, heads, **kwargs):
        super().__init__()
        self.heads = heads
        slopes = torch.Tensor(self._get_slopes(heads))
        slopes = rearrange(slopes, 'h -> h 1 1')
        self.register_buffer('slopes', slopes, persistent = False)
        self.register_buffer('bias', None, persistent = False)
    
    def get_bias(self, i, j, device):
        i_arange = torch.arange(i, device = device)
        j_arange = torch.arange(j, device = device)
        bias = -torch.abs(rearrange(j_arange, 'j -> 1 1 j') - rearrange(i_arange, 'i -> 1 i 1'))
        return bias

    @staticmethod
    def _get_slopes(heads):
        def get_slopes_power_of_2(n):
            start = (2**(-2**-(log2(n)-3)))
            ratio = start
            return [start*ratio**i for i in range(n)]

        if log2(heads).is_integer():
            return get_slopes_power_of_2(heads)

        closest_power_of_2 = 2 ** floor(log2(heads))
        return get_slopes_power_of_2(closest_power_of_2) + get_slopes_power_of_2(2 * closest_power_of_2)[0::2][:heads-closest_power_of_2]

    def forward(self, qk_sim):
        h, i, j, device = *qk_sim.shape[-3:], qk_sim.device

        if exists(self.bias) and self.bias.shape[-1] >= j:
            return qk_sim + self.bias[..., :i, :j]

        bias = self.get_bias(i, j, device)
        bias = bias * self.slopes

        num_heads_unalibied = h - bias.shape[0]
        bias = F.pad(bias, (0, 0, 0, 0, 0, num_heads_unalibied))
        self.register_buffer('bias', bias, persistent=False)

        return bias

# residual

class Residual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x) + x


# classic Noam Shazeer paper, except here they use SwiGLU instead of the more popular GEGLU for gating the feedforward
# https://arxiv.org/abs/2002.05202


class SwiGLU(nn.Module):
    def forward(self, x):
        x, gate = x.chunk(2, dim=-1)
        return F.silu(gate) * x


# parallel attention and feedforward with residual
# discovered by Wang et al + EleutherAI from GPT-J fame


class ParallelTransformerBlock(nn.Module):
    def __init__(self, dim, dim_head=64, heads=8, ff_mult=4):
        super().__init__()
        self.norm = RMSNorm(dim)

        attn_inner_dim = dim_head * heads
        ff_inner_dim = dim * ff_mult
        self.fused_dims = (attn_inner_dim, dim_head, (ff_inner_dim * 2))

        self.heads = heads
        self.scale = dim_head**-0.5

        self.alibi_pos_biases = AlibiPositionalBias(heads = self.heads)

        self.fused_attn_ff_proj = nn.Linear(dim, sum(self.fused_dims), bias=False)
        self.attn_out = nn.Linear(attn_inner_dim, dim, bias=False)

        self.ff_out = nn.Sequential(
            SwiGLU(),
            nn.Linear(ff_inner_dim, dim, bias=False)
        )

        # for caching causal mask

        self.register_buffer("mask", None, persistent=False)

    def get_mask(self, n, device):
        if self.mask is not None and self.mask.shape[-1] >= n:
            return self.mask[:n, :n]

        mask = torch.triu(torch.ones((n, n), device=device, dtype=torch.bool), 1)
        self.register_buffer("mask", mask, persistent=False)
        return mask

    def forward(self, x):

        """
        einstein notation
        b - batch
        h - heads
        n, i, j - sequence length (base sequence length, source, target)
        d - feature dimension
        """
        n, device, h = x.shape[1], x.device, self.heads

        # pre layernorm

        x = self.norm(x)

        # attention queries, keys or values (shared key / values is a personal discovery of mine), and feedforward inner

        q, kv, ff = self.fused_attn_ff_proj(x).split(self.fused_dims, dim=-1)

        # split heads
        # they use multi-query single-key-value attention, yet another Noam Shazeer paper
        # they found no performance loss past a certain scale, and more efficient decoding obviously
        # https://arxiv.org/abs/1911.02150

        q = rearrange(q, "b n (h d) -> b h n d", h = h)

        # scale

        q = q * self.scale

        # similarity

        sim = einsum("b h i d, b j d -> b h i j", q, kv)

        # add the alibi bias

        sim = sim + self.alibi_pos_biases(sim)

        # causal mask

        causal_mask = self.get_mask(n, device)
        sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)

        # attention

        attn = sim.softmax(dim=-1)
        out = einsum("b h i j, b j d -> b h i d", attn, kv)

        # merge heads

        out = rearrange(out, "b h n d -> b n (h d)")

        merge_heads = self.attn_out(out) + self.ff_out(ff)
        return merge_heads
