"""transformer-toolkit 0.0.33's GroupedQueryAttention ("Fewer k/v heads than q heads. Used in LLaMA 3, Mistral."):
GroupedQueryAttention(dim, n_heads, n_kv_heads, pos_enc=None), a q Linear and a FUSED kv Linear (dim -> 2 *
n_kv_heads * head_dim, [K; V] split by width), no biases, the kv heads repeated with repeat_interleave(n_heads //
n_kv_heads, dim=1) AFTER the cache is appended (the cache keeps the n_kv_heads heads), an optional rotary module
(none here: the class is checked as it is built without one), forward(x, mask=None, past_kv=None) returning (out,
present_kv), SDPA with `is_causal = mask is None and past_kv is None`: no mask at all once a cache is passed.

Source: https://github.com/Barbade22/transformer-toolkit (transformer-toolkit 0.0.33 on PyPI, the distribution's Homepage), files
transformer_toolkit/attention.py and transformer_toolkit/positional_encodings.py as released in transformer-toolkit 0.0.33.
Licence: Apache-2.0 (licenses/LICENSE in the wheel's dist-info is the Apache License 2.0, its appendix's copyright line left as
the template's "Copyright [yyyy] [name of copyright owner]"; METADATA's classifier says "License :: OSI Approved :: MIT
License": both permissive).
Copied: verbatim from the PyPI wheel transformer-toolkit==0.0.33 (pip download --no-deps): attention.py lines 2-4 (imports) and
44-84 .  Left out: attention.py's
`from .positional_encodings import RoPE` (line 5; the class is defined in this file, as the isinstance test
in forward needs), the other attention classes, the blocks and the model.
ADDED: this docstring and the constants (the class is the target itself).
Truth: bug (in _truth.py).  Without a cache, out = gqa_forward (query head h reads kv head h // (n_heads /
n_kv_heads)) with q.weight and the two halves of kv.weight, and an independent per-head loop, exactly; a prompt of
4 then one token per call through past_kv = the whole forward; a prompt of 4 then 2 tokens in one call: the first
new token's output moves with the second's input.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RoPE(nn.Module):
    """
    Applied inside attention to q and k AFTER head-splitting.
    q, k shape expected: [B, n_heads, T, head_dim]

    Instantiated once in Transformer.__init__() with head_dim
    (= dim // n_heads) and passed into every attention module so
    all layers share the same frequency table and cache.

    Never called on the residual stream x.
    """
    def __init__(self, head_dim: int, max_seq: int = 4096, base: int = 10000):
        super().__init__()
        self._head_dim = head_dim
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv_freq)
        self._build_cache(max_seq)

    def _build_cache(self, seq_len: int):
        t     = torch.arange(seq_len, device=self.inv_freq.device).float()
        freqs = torch.outer(t, self.inv_freq)            # [seq_len, head_dim//2]
        emb   = torch.cat([freqs, freqs], dim=-1)        # [seq_len, head_dim]
        # [1, 1, seq_len, head_dim] — broadcasts over batch and n_heads
        self.register_buffer("cos_cache", emb.cos()[None, None], persistent=False)
        self.register_buffer("sin_cache", emb.sin()[None, None], persistent=False)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, offset: int = 0):
        """
        q, k: [B, n_heads, T, head_dim]
        offset: number of tokens already in the KV cache (0 during training
                or prefill, >0 during cached decode steps).
        Returns rotated (q, k) with identical shape.
        """
        T   = q.shape[2]
        end = offset + T
        if end > self.cos_cache.shape[2]:
            self._build_cache(end)
        # cast to q's dtype — cache is kept float32 for precision but q/k
        # may be bfloat16/float16 under mixed precision training
        cos = self.cos_cache[:, :, offset:end, :].to(dtype=q.dtype)
        sin = self.sin_cache[:, :, offset:end, :].to(dtype=q.dtype)
        return (
            q * cos + _rotate_half(q) * sin,
            k * cos + _rotate_half(k) * sin,
        )


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


class GroupedQueryAttention(nn.Module):
    """Fewer k/v heads than q heads. Used in LLaMA 3, Mistral."""
    def __init__(self, dim: int, n_heads: int, n_kv_heads: int, pos_enc=None):
        super().__init__()
        self.n_heads    = n_heads
        self.n_kv_heads = n_kv_heads
        self.head_dim   = dim // n_heads
        self.q          = nn.Linear(dim, dim, bias=False)
        self.kv         = nn.Linear(dim, 2 * n_kv_heads * self.head_dim, bias=False)
        self.out        = nn.Linear(dim, dim, bias=False)
        self.pos_enc    = pos_enc

    def forward(self, x, mask=None, past_kv=None):
        B, T, C = x.shape
        q = self.q(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).split(self.n_kv_heads * self.head_dim, dim=-1)
        def split_kv(t): return t.view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        k, v = split_kv(k), split_kv(v)

        if isinstance(self.pos_enc, RoPE):
            offset = past_kv[0].shape[2] if past_kv is not None else 0
            q, k = self.pos_enc.rotate(q, k, offset=offset)

        if past_kv is not None:
            k = torch.cat([past_kv[0], k], dim=2)
            v = torch.cat([past_kv[1], v], dim=2)

        present_kv = (k, v)

        r = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(r, dim=1)
        v = v.repeat_interleave(r, dim=1)

        is_causal = mask is None and past_kv is None
        out = F.scaled_dot_product_attention(
            q, k, v,
            attn_mask  = mask,
            is_causal  = is_causal,
            dropout_p  = 0.0,
        )
        return self.out(out.transpose(1, 2).reshape(B, -1, C)), present_kv


# --- added (not in the package) ---
# --- end of the added part ---
# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "GroupedQueryAttention"
TRUTH = "bug"
BUG = "kvcache-chunk-unmasked"
RULE_GAPS = ("grouped-query", "fused-kv-no-bias", "kv-cache-tuple-argument", "tuple-output", "no-out-proj-bias",
             "no-divisibility-check")
FORWARD = "x, mask=None, past_kv=None"
NOTES = "GroupedQueryAttention(dim, n_heads, n_kv_heads, pos_enc=None). forward returns (out, present_kv)."
OUTCOME = 'fail'
DIAGNOSIS = 'kvcache-chunk-unmasked'
EXPECTED_BECAUSE = ("is_causal = mask is None and past_kv is None: with a cache passed SDPA masks nothing, so two new "
                    "tokens fed in one call after a cached prompt see each other; the grouped layer is right without "
                    "a cache")
