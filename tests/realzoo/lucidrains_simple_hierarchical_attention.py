"""Attention from lucidrains/simple-hierarchical-transformer (first version): einops rearrange, einsum, dim_head argument, no biases.

Source: https://github.com/lucidrains/simple-hierarchical-transformer/blob/95920f9aeea2045f607fefa62920880dafd218f3/simple_hierarchical_transformer/simple_hierarchical_transformer.py (lines 14-44: class Attention); commit "essential ingredient" on refs/heads/main. The same class text is unchanged in b3fe58e ("get a simple baseline up"); later commits replaced it.
Licence: MIT (Copyright (c) 2023 Phil Wang), LICENSE at the repository root.
Copied: verbatim (class Attention; `import torch`, `import torch.nn.functional as F`, `from torch import nn, einsum` as in the original). The original's `from einops import rearrange` is replaced by a minimal `rearrange` shim ABOVE the class that implements exactly the two patterns the class uses ('b n (h d) -> b h n d' with h=..., and 'b h n d -> b n (h d)'); it uses the real einops when installed. The unused helper `exists` is not copied.
Truth: correct causal MHA, lucidrains style: fused to_qkv Linear(dim, 3*heads*dim_head, bias=False) chunked into [Q; K; V] row blocks, rearrange 'b n (h d) -> b h n d' (= view(B, n, H, dh).transpose(1, 2)), q * dim_head**-0.5, einsum scores, mask triu(1) built in forward on x.device filled with -finfo(dtype).max (finite but the most negative float: exp underflows to exactly 0), softmax(-1), einsum with v, rearrange back (= transpose(1, 2) then merge), to_out Linear(heads*dim_head, dim, bias=False). No dropout.
"""
import torch
import torch.nn.functional as F
from torch import nn, einsum

# --- shim: einops.rearrange for the two patterns used below (real einops is used when it is installed) ---
try:
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == 'b n (h d) -> b h n d':
            b, n, hd = t.shape
            h = axes['h']
            return t.reshape(b, n, h, hd // h).permute(0, 2, 1, 3)
        if pattern == 'b h n d -> b n (h d)':
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')
# --- end of shim; copied block follows ---

TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-out-proj-bias", "head-dim-argument", "out-proj-to-d-in")
FORWARD = "x"
NOTES = ("Constructor Attention(dim, dim_head=64, heads=8): the head width is a constructor ARGUMENT, so d_out = heads*dim_head is "
         "derived (a checker must bind dim_head = d_out // heads) and no divisibility check exists or is needed. No context length "
         "(mask made in forward on x.device). No biases anywhere: to_qkv bias=False, to_out bias=False (param count 3*dim*inner + inner*dim). "
         "to_out maps inner -> dim (= d_in), so the output width is d_in; equals the lesson only when dim == heads*dim_head. "
         "Fused weight to_qkv.weight (3*inner, dim) = [W_q; W_k; W_v] row blocks (chunk(3, dim=-1)). Needs einops (shim included).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'correct math; two lesson rules not followed (divisibility, output bias): no single mistake to name'


class Attention(nn.Module):
    def __init__(
        self,
        dim,
        dim_head = 64,
        heads = 8
    ):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.heads = heads
        dim_inner = dim_head * heads

        self.to_qkv = nn.Linear(dim, dim_inner * 3, bias = False)
        self.to_out = nn.Linear(dim_inner, dim, bias = False)

    def forward(self, x):
        n = x.shape[-2]
        q, k, v = self.to_qkv(x).chunk(3, dim = -1)
        q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = self.heads), (q, k, v))
        q = q * self.scale

        sim = einsum('b h i d, b h j d -> b h i j', q, k)

        causal_mask = torch.ones((n, n), device = x.device, dtype = torch.bool).triu(1)
        sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)

        attn = sim.softmax(dim = -1)

        out = einsum('b h i j, b h j d -> b h i d', attn, v)
        out = rearrange(out, 'b h n d -> b n (h d)')
        return self.to_out(out)
