"""MEGABYTE-pytorch's Attention (lucidrains): keyword-only Attention(*, dim, dim_head=64, heads=8, dropout=0.,
flash=False), an RMSNorm of its own INSIDE (x / (||x|| * dim**-0.5) * g), to_q and a fused to_kv chunked [K; V], einops
rearrange 'b n (h d) -> b h n d', an optional rotary_emb argument (None by default: no rotation), and a separate
Attend module (causal=True) that computes einsum('b h i d, b h j d -> b h i j') * dh**-0.5, fills triu(j - i + 1)
with -finfo.max, softmax, dropout, einsum back; to_out without bias; no residual.

Source: https://github.com/lucidrains/MEGABYTE-pytorch (the PyPI project's homepage), files MEGABYTE_pytorch/attend.py
and MEGABYTE_pytorch/megabyte.py as released in MEGABYTE-pytorch 0.3.6 on PyPI.
Licence: MIT (Copyright (c) 2023 Phil Wang), LICENSE in the wheel's dist-info.
Copied: verbatim from the PyPI wheel MEGABYTE_pytorch==0.3.6 (pip download --no-deps): the whole of attend.py
(lines 1-129) but line 5, `from einops import rearrange`, replaced by the shim below; and from megabyte.py line 9
(`from torch.nn import Module, ModuleList`) and lines 101-163 (RMSNorm, FeedForward, Attention); its other imports
(beartype, tqdm, the rest of einops) serve only the classes left out (Transformer, MEGABYTE). Attention uses
megabyte.py's `exists`, which is the same function as attend.py's (lines 24-25 there, 12-13 here). ADDED: a shim for
`from einops import rearrange` (the two patterns Attention uses and the two Attend's flash path uses; the real einops
when installed) and this entry's constants.
Truth: correct. Attention(dim=d, heads=H, dim_head=d // H)(x) = MHA(RMSNorm(x)), where MHA is mha_forward with W_q =
to_q, [W_k; W_v] = to_kv, W_o = to_out, no biases, exactly (-finfo.max is an exact 0 after the softmax in float64);
no leak. Not the lesson's layer as it stands (the RMSNorm is part of the module). Lesson rules not followed: no
divisibility check (dim_head is an argument) and no output bias.
"""
from functools import wraps

import torch
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
        if pattern == "b n d -> b 1 n d":
            return t.unsqueeze(1)
        if pattern == "b j -> b 1 1 j":
            return t[:, None, None, :]
        raise NotImplementedError(f"rearrange shim: pattern {pattern!r} not supported")
# --- end of shim; copied blocks follow ---
from packaging import version
from torch import einsum, nn
from torch.nn.attention import SDPBackend
from torch.nn import Module, ModuleList

TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("rmsnorm-inside", "keyword-only-constructor", "to-q-and-fused-to-kv", "separate-attend-module",
             "head-dim-argument", "no-out-proj-bias", "no-context-length", "finfo-max-fill")
FORWARD = "x, rotary_emb=None"
NOTES = ("Attention(*, dim, dim_head=64, heads=8, dropout=0., flash=False). forward(x, rotary_emb=None) -> "
         "to_out(attend(q, k, v)) of RMSNorm(x); parameters norm.g, to_q, to_kv, to_out (no biases).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("correct attention behind an RMSNorm kept inside the module: with the norm switched off the lesson's "
                    "layer reproduces it; two rules are not followed (divisibility, out-proj-bias), so none is named")

# helpers

def exists(val):
    return val is not None

def once(fn):
    called = False
    @wraps(fn)
    def inner(x):
        nonlocal called
        if called:
            return
        called = True
        return fn(x)
    return inner

print_once = once(print)

# main class

class Attend(nn.Module):
    def __init__(
        self,
        causal = False,
        dropout = 0.,
        flash = False
    ):
        super().__init__()
        self.dropout = dropout
        self.attn_dropout = nn.Dropout(dropout)

        self.causal = causal
        self.flash = flash
        assert not (flash and version.parse(torch.__version__) < version.parse('2.0.0')), 'in order to use flash attention, you must be using pytorch 2.0 or above'

        # default cpu attention configs
        self.attn_cfg = [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION]

        if not torch.cuda.is_available() or not flash:
            return

        device_properties = torch.cuda.get_device_properties(torch.device('cuda'))

        if device_properties.major == 8 and device_properties.minor == 0:
            print_once('A100 GPU detected, using flash attention if input tensor is on cuda')
            self.attn_cfg = [SDPBackend.FLASH_ATTENTION]
        else:
            print_once('Non-A100 GPU detected, using math or mem efficient attention if input tensor is on cuda')
            self.attn_cfg = [SDPBackend.MATH, SDPBackend.EFFICIENT_ATTENTION]

    def get_mask(self, i, j, device):
        return torch.ones((i, j), device=device, dtype=torch.bool).triu(j - i + 1)

    def flash_attn(self, q, k, v, mask = None, attn_bias = None):
        _, heads, q_len, _, k_len, is_cuda, device = *q.shape, k.shape[-2], q.is_cuda, q.device

        # single headed key / values

        if k.ndim == 3:
            k = rearrange(k, 'b n d -> b 1 n d')

        if v.ndim == 3:
            v = rearrange(v, 'b n d -> b 1 n d')

        # Check if mask exists and expand to compatible shape
        # The mask is B L, so it would have to be expanded to B H N L

        if exists(mask) and mask.ndim != 4:
            mask = rearrange(mask, 'b j -> b 1 1 j')
            mask = mask.expand(-1, heads, q_len, -1)

        # pytorch 2.0 flash attn: q, k, v, mask, dropout, causal, softmax_scale

        with torch.nn.attention.sdpa_kernel(self.attn_cfg):
            out = F.scaled_dot_product_attention(
                q, k, v,
                attn_mask = mask,
                dropout_p = self.dropout if self.training else 0., 
                is_causal = self.causal
            )
        return out

    def forward(self, q, k, v, mask = None):
        """
        einstein notation
        b - batch
        h - heads
        n, i, j - sequence length (base sequence length, source, target)
        d - feature dimension
        """

        q_len, k_len, device = q.shape[-2], k.shape[-2], q.device

        scale = q.shape[-1] ** -0.5

        kv_einsum_eq = 'b j d' if k.ndim == 3 else 'b h j d'

        if self.flash:
            return self.flash_attn(q, k, v, mask = mask)

        # similarity

        sim = einsum(f"b h i d, {kv_einsum_eq} -> b h i j", q, k) * scale

        # causal mask

        if self.causal:
            causal_mask = self.get_mask(q_len, k_len, device)
            sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)

        # attention

        attn = sim.softmax(dim=-1)
        attn = self.attn_dropout(attn)

        # aggregate values

        out = einsum(f"b h i j, {kv_einsum_eq} -> b h i d", attn, v)

        return out

class RMSNorm(Module):
    def __init__(self, dim, eps = 1e-8):
        super().__init__()
        self.scale = dim ** -0.5
        self.eps = eps
        self.g = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        norm = torch.norm(x, dim = -1, keepdim = True) * self.scale
        return x / norm.clamp(min = self.eps) * self.g

# helper classes

def FeedForward(*, dim, mult = 4, dropout = 0.):
    return nn.Sequential(
        RMSNorm(dim),
        nn.Linear(dim, dim * mult),
        nn.GELU(),
        nn.Dropout(dropout),
        nn.Linear(dim * mult, dim)
    )

class Attention(Module):
    def __init__(
        self,
        *,
        dim,
        dim_head = 64,
        heads = 8,
        dropout = 0.,
        flash = False
    ):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.heads = heads
        inner_dim = dim_head * heads

        self.attend = Attend(
            causal = True,
            flash = flash,
            dropout = dropout
        )

        self.dropout = nn.Dropout(dropout)
        self.norm = RMSNorm(dim)
        self.to_q = nn.Linear(dim, inner_dim, bias = False)
        self.to_kv = nn.Linear(dim, inner_dim * 2, bias = False)
        self.to_out = nn.Linear(inner_dim, dim, bias = False)

    def forward(self, x, rotary_emb = None):
        h, device = self.heads, x.device

        x = self.norm(x)
        q, k, v = (self.to_q(x), *self.to_kv(x).chunk(2, dim = -1))
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, k, v))

        if exists(rotary_emb):
            q, k = map(lambda t: apply_rotary_pos_emb(rotary_emb, t), (q, k))

        out = self.attend(q, k, v)

        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out)
