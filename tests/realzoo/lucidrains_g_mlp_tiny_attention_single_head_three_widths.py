"""g-mlp-pytorch's (lucidrains) Attention: gMLP's "tiny attention" (aMLP, Liu et al. 2021), a SINGLE-HEAD layer with
three widths of its own - Attention(dim_in, dim_out, dim_inner, causal=False): a fused to_qkv Linear(dim_in,
3 * dim_inner, bias=False) chunked in three, scores by einsum('b i d, b j d -> b i j') times dim_inner ** -0.5, the
causal flag making a triu(1) mask per call and filling IN PLACE (masked_fill_) with -finfo.max, softmax, einsum with v,
to_out Linear(dim_inner, dim_out) with bias.  gMLPBlock builds it as Attention(dim, dim_ff // 2, attn_dim, causal)
and adds its output to the spatial gating unit's.

Source: https://github.com/lucidrains/g-mlp-pytorch (the wheel's Home-page), file g_mlp_pytorch/g_mlp_pytorch.py as
released in g-mlp-pytorch 0.1.5 on PyPI.
Licence: MIT (Copyright (c) 2021 Phil Wang), the wheel's METADATA "License: MIT" and LICENSE in its dist-info.
Copied: verbatim from the PyPI wheel g-mlp-pytorch==0.1.5 (pip download --no-deps): g_mlp_pytorch.py lines 2 and 4
(imports) and 76-96 (class Attention, whole), compared by program with the unpacked wheel.  Left out: the einops
imports (lines 6-7, used only by the classes left out), the spatial gating unit, the gMLP blocks and models.
ADDED: this docstring, the factory build(d_in, d_out, context_length=None) at the end - Attention(d_in, d_out, d_out,
causal=True): the inner width taken equal to the output width, as the lesson's single head has it - and this entry's
constants.
Truth: correct as a single head (in _truth.py): build(10, 12) = mha_forward with ONE head (to_qkv's row blocks, to_out
with its bias), exactly, and Attention(10, 6, 8, causal=True) (three different widths) too; no leak.  -finfo.max is a
finite fill, exact wherever scores are finite.
"""
import torch
from torch import nn, einsum


class Attention(nn.Module):
    def __init__(self, dim_in, dim_out, dim_inner, causal = False):
        super().__init__()
        self.scale = dim_inner ** -0.5
        self.causal = causal

        self.to_qkv = nn.Linear(dim_in, dim_inner * 3, bias = False)
        self.to_out = nn.Linear(dim_inner, dim_out)

    def forward(self, x):
        device = x.device
        q, k, v = self.to_qkv(x).chunk(3, dim = -1)
        sim = einsum('b i d, b j d -> b i j', q, k) * self.scale

        if self.causal:
            mask = torch.ones(sim.shape[-2:], device = device).triu(1).bool()
            sim.masked_fill_(mask[None, ...], -torch.finfo(q.dtype).max)

        attn = sim.softmax(dim = -1)
        out = einsum('b i j, b j d -> b i d', attn, v)
        return self.to_out(out)

# --- added (not in the package) ---
def build(d_in, d_out, context_length=None):
    """The tiny attention with causal=True and dim_inner = dim_out (gMLPBlock passes attn_dim, a free width)."""
    return Attention(d_in, d_out, d_out, causal=True)
# --- end of the added part ---
# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("single-head", "three-widths-in-out-inner", "einsum", "fill-finfo-max-in-place", "causal-flag")
FORWARD = "x"
NOTES = ("Attention(dim_in, dim_out, dim_inner, causal=False); forward(x) -> (B, n, dim_out); TARGET is the added "
         "factory build(d_in, d_out, context_length=None).")
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("one causal head with an output projection, checked as the single-head form: the lesson's layer "
                    "with H = 1")
