"""PaLM-pytorch's (lucidrains) first Attention: multi-query (ONE key/value head, to_kv Linear(dim, 2 * dim_head) chunked), to_q separate, rotate-half rotary embedding, einsum, pre-LayerNorm INSIDE the attention module, causal mask and rotary table cached with register_buffer(None) then re-registered, -finfo.max fill and a max-subtracted softmax, no biases.

Source: https://github.com/lucidrains/PaLM-pytorch (the repository the wheel's METADATA names), file palm_pytorch/palm_pytorch.py (classes LayerNorm, RotaryEmbedding, functions rotate_half, apply_rotary_pos_emb, class Attention) as released in PaLM-pytorch 0.0.12 on PyPI. PaLM() wraps it as ParallelResidual(Attention(...), FeedForward(...)): x + attn(x) + ff(x).
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2022 Phil Wang").
Copied: verbatim from the PyPI wheel PaLM-pytorch==0.0.12 (pip download --no-deps): lines 1-2 and 4 of palm_pytorch/palm_pytorch.py (`import torch`, `import torch.nn.functional as F`, `from torch import einsum, nn`; line 3, `from einops import rearrange`, is replaced by the shim), lines 6-17 (the "# normalization" block, LayerNorm), lines 33-56 (the "# rotary positional embedding" block) and lines 80-173 (the "# attention" block); every copied line compared by program with the unpacked wheel. ParallelResidual, FeedForward and PaLM are left out. ADDED: a shim for `from einops import rearrange` (the three patterns the copied code uses; real einops when installed) and this entry's constants after it.
Truth: Attention(x) = MQA_rope(LayerNorm(x)) exactly: LayerNorm(dim) with gamma (a parameter, ones at init) and beta a zeros BUFFER (no bias can be learned), then q = to_q(x) split in `heads` heads of width dim_head, k, v = to_kv(x).chunk(2) each of width dim_head shared by every head, rotate-half RoPE (theta 10000, cat(freqs, freqs)) on q and on the single k, q * dim_head**-0.5, causal mask triu(1) filled with -finfo.max (exact in float64), softmax after subtracting the row max, einsum with the single v, merge, to_out without bias. So it is a correct causal multi-QUERY rotary attention behind a layer norm: not the lesson's layer (one key/value head for all heads; the norm is part of the module). Since issue 28's known-wrong fixes mha-check switches the LayerNorm off (harness/child/norms.py: a class named LayerNorm that acts per token and ignores scale) and proves the rest against its multi-query rotary reference.
"""
import torch
import torch.nn.functional as F
from torch import einsum, nn

# --- added for the zoo: a shim for `from einops import rearrange` (the real einops when installed) ---
try:
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        if pattern == "... (j d) -> ... j d":
            j = axes["j"]
            return t.reshape(*t.shape[:-1], j, t.shape[-1] // j)
        if pattern == "b n (h d) -> b h n d":
            b, n, hd = t.shape
            h = axes["h"]
            return t.reshape(b, n, h, hd // h).permute(0, 2, 1, 3)
        if pattern == "b h n d -> b n (h d)":
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        raise NotImplementedError(f"rearrange shim: pattern {pattern!r} not supported")
# --- end of shim; copied blocks follow ---

TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("layernorm-inside", "multi-query", "rope", "head-dim-argument", "no-out-proj-bias", "no-context-length",
             "cache-by-register-buffer-none")
FORWARD = "x"
NOTES = ("Attention(dim, dim_head=64, heads=8). forward(x). Weights norm.gamma (dim,), buffer norm.beta (zeros), to_q "
         "(heads * dim_head, dim), to_kv (2 * dim_head, dim) = [W_k; W_v] of ONE head, to_out (dim, heads * dim_head), "
         "no biases; buffers inv_freq, mask and pos_emb (None until the first forward).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = ('correct multi-query rotary attention with a LayerNorm inside the module: with the norm switched off '
                    'the multi-query rotary reference reproduces it; only the divisibility rule is not followed (the '
                    'norm is no bug, and its gamma is left out of the count)')


# normalization
# they use layernorm without bias, something that pytorch does not offer


class LayerNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))
        self.register_buffer("beta", torch.zeros(dim))

    def forward(self, x):
        return F.layer_norm(x, x.shape[-1:], self.gamma, self.beta)


# rotary positional embedding
# https://arxiv.org/abs/2104.09864


class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)

    def forward(self, max_seq_len, *, device):
        seq = torch.arange(max_seq_len, device=device, dtype=self.inv_freq.dtype)
        freqs = einsum("i , j -> i j", seq, self.inv_freq)
        return torch.cat((freqs, freqs), dim=-1)


def rotate_half(x):
    x = rearrange(x, "... (j d) -> ... j d", j=2)
    x1, x2 = x.unbind(dim=-2)
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(pos, t):
    return (t * pos.cos()) + (rotate_half(t) * pos.sin())


# attention


class Attention(nn.Module):
    def __init__(self, dim, dim_head=64, heads=8):
        super().__init__()
        inner_dim = dim_head * heads
        self.norm = LayerNorm(dim)
        self.heads = heads
        self.scale = dim_head**-0.5
        self.rotary_emb = RotaryEmbedding(dim_head)

        self.to_q = nn.Linear(dim, inner_dim, bias=False)
        self.to_kv = nn.Linear(dim, dim_head * 2, bias=False)
        self.to_out = nn.Linear(inner_dim, dim, bias=False)

        # for caching causal mask and rotary embeddings

        self.register_buffer("mask", None, persistent=False)
        self.register_buffer("pos_emb", None, persistent=False)

    def get_mask(self, n, device):
        if self.mask is not None and self.mask.shape[-1] >= n:
            return self.mask[:n, :n]

        mask = torch.ones((n, n), device=device, dtype=torch.bool).triu(1)
        self.register_buffer("mask", mask, persistent=False)
        return mask

    def get_rotary_embedding(self, n, device):
        if self.pos_emb is not None and self.pos_emb.shape[-2] >= n:
            return self.pos_emb[:n]

        pos_emb = self.rotary_emb(n, device=device)
        self.register_buffer("pos_emb", pos_emb, persistent=False)
        return pos_emb

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

        # queries, keys, values

        q, k, v = (self.to_q(x), *self.to_kv(x).chunk(2, dim=-1))

        # split heads
        # they use multi-query single-key-value attention, yet another Noam Shazeer paper
        # they found no performance loss past a certain scale, and more efficient decoding obviously
        # https://arxiv.org/abs/1911.02150

        q = rearrange(q, "b n (h d) -> b h n d", h=h)

        # rotary embeddings

        positions = self.get_rotary_embedding(n, device)
        q, k = map(lambda t: apply_rotary_pos_emb(positions, t), (q, k))

        # scale

        q = q * self.scale

        # similarity

        sim = einsum("b h i d, b j d -> b h i j", q, k)

        # causal mask

        causal_mask = self.get_mask(n, device)
        sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)

        # attention

        sim = sim - sim.amax(dim=-1, keepdim=True).detach()
        attn = sim.softmax(dim=-1)

        # aggregate values

        out = einsum("b h i j, b j d -> b h i d", attn, v)

        # merge heads

        out = rearrange(out, "b h n d -> b n (h d)")
        return self.to_out(out)
