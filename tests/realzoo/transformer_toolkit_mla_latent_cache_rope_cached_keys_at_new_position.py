"""transformer-toolkit 0.0.33's MLAttention ("Multi-Head Latent Attention (DeepSeek-V2/V3)"): MLAttention(dim,
n_heads, latent_dim, pos_enc=None), keys and values made from a shared LATENT (kv_down: dim -> latent_dim, then k_up
and v_up: latent_dim -> dim), q and out Linears, no biases; the cache holds the LATENT (present_kv = every token's
latent so far, one tensor, not a (k, v) pair), and keys and values are recomputed from all of it on every call.
With the rotary module, `q, k = self.pos_enc.rotate(q, k, offset=past_kv.shape[1])` turns the new queries AND EVERY
KEY, the cached ones too, by the angles of the new tokens' positions: for one new token every key gets the newest
position's angle (the rotation cancels in q.k and the decode attends as if there were no rotary embedding at all),
and for two new tokens the (1, 1, 2, head_dim) cos table does not broadcast against the keys and the call raises.
`is_causal = mask is None and past_kv is None` as in the package's other classes.

Source: https://github.com/Barbade22/transformer-toolkit (transformer-toolkit 0.0.33 on PyPI, the distribution's Homepage), files
transformer_toolkit/attention.py and transformer_toolkit/positional_encodings.py as released in transformer-toolkit 0.0.33.
Licence: Apache-2.0 (licenses/LICENSE in the wheel's dist-info is the Apache License 2.0, its appendix's copyright line left as
the template's "Copyright [yyyy] [name of copyright owner]"; METADATA's classifier says "License :: OSI Approved :: MIT
License": both permissive).
Copied: verbatim from the PyPI wheel transformer-toolkit==0.0.33 (pip download --no-deps): attention.py lines 2-4 (imports) and
172-221 and positional_encodings.py lines 47-91 (RoPE) and 128-130 (_rotate_half).  Left out: attention.py's
`from .positional_encodings import RoPE` (line 5; the class is defined in this file), the other attention classes, the blocks and the model.
ADDED: this docstring, the factory build(dim, n_heads, max_seq=4096) at the end (the package's
Transformer for attn="mla", pos_enc="rope", with latent_dim = dim: MLAttention(dim, n_heads, dim, RoPE(dim //
n_heads, max_seq))) and the constants.
Truth: bug (in _truth.py).  Without a cache, out = rope_mha_forward(convention="half") with W_k = k_up.weight @
kv_down.weight and W_v = v_up.weight @ kv_down.weight (and the independent per-head rotary loop), to relative 1e-5
(float32 cos/sin), no leak; a prompt of 4 then one token per call through past_kv differs from the whole forward
(token 4 by more than 1e-2), and equals, token by token, the attention WITHOUT rotary embedding on tokens 0..t at
the last position (every key turned by the query's angle); a prompt of 4 then 2 tokens in one call raises
RuntimeError.
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


class MLAttention(nn.Module):
    """
    Multi-Head Latent Attention (DeepSeek-V2/V3).
    Compresses k/v into a small latent vector to reduce KV cache at inference.
    Cache stores the latent vector (not full K/V) — that's the whole point.
    """
    def __init__(self, dim: int, n_heads: int, latent_dim: int, pos_enc=None):
        super().__init__()
        self.n_heads  = n_heads
        self.head_dim = dim // n_heads
        self.kv_down  = nn.Linear(dim, latent_dim, bias=False)
        self.k_up     = nn.Linear(latent_dim, dim, bias=False)
        self.v_up     = nn.Linear(latent_dim, dim, bias=False)
        self.q        = nn.Linear(dim, dim, bias=False)
        self.out      = nn.Linear(dim, dim, bias=False)
        self.pos_enc  = pos_enc

    def forward(self, x, mask=None, past_kv=None):
        B, T, C = x.shape
        q      = self.q(x)
        latent = self.kv_down(x)   # [B, T, latent_dim] — this is what we cache

        if past_kv is not None:
            # past_kv is the accumulated latent cache [B, S, latent_dim]
            latent_full = torch.cat([past_kv, latent], dim=1)
        else:
            latent_full = latent

        present_kv = latent_full   # store latent, not K/V

        k = self.k_up(latent_full)
        v = self.v_up(latent_full)

        def split(t, seq): return t.view(B, seq, self.n_heads, self.head_dim).transpose(1, 2)
        q   = split(q,           T)
        k   = split(k, latent_full.shape[1])
        v   = split(v, latent_full.shape[1])

        if isinstance(self.pos_enc, RoPE):
            offset = past_kv.shape[1] if past_kv is not None else 0
            q, k = self.pos_enc.rotate(q, k, offset=offset)

        is_causal = mask is None and past_kv is None
        out = F.scaled_dot_product_attention(
            q, k, v,
            attn_mask  = mask,
            is_causal  = is_causal,
            dropout_p  = 0.0,
        )
        return self.out(out.transpose(1, 2).reshape(B, -1, C)), present_kv


# --- added (not in the package) ---


def build(dim, n_heads, max_seq=4096):
    return MLAttention(dim, n_heads, dim, RoPE(dim // n_heads, max_seq))
# --- end of the added part ---
# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "bug"
BUG = "kvcache-rope-cached-keys-at-new-position"
RULE_GAPS = ("latent-kv-projection", "latent-cache-tensor", "rope-module-argument", "float32-rope", "tuple-output",
             "no-out-proj-bias", "no-divisibility-check")
FORWARD = "x, mask=None, past_kv=None"
NOTES = ("MLAttention(dim, n_heads, latent_dim, pos_enc=None); TARGET is the added factory build(dim, n_heads, "
         "max_seq=4096) with latent_dim = dim. forward returns (out, present_kv = the latent of every token so far).")
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("decoded one token per call with its latent cache, token t differs from the layer's own forward "
                    "on tokens 0..t (every cached key is rotated at the newest position): kv-cache fails without any "
                    "reading of the weights; the latent projections (W_k = k_up kv_down) are no reading mha-check "
                    "makes, so the math itself is cannot tell, and no catalogued mistake is this one")
