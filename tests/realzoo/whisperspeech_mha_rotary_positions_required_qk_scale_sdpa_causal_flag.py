"""WhisperSpeech 0.8.9's MultiHeadAttention (Collabora's WhisperSpeech text-to-speech: the attention of the
text-to-semantic and semantic-to-acoustic transformers, "mostly borrowed from" OpenAI Whisper's):
MultiHeadAttention(n_state, n_head, qk_scale=1, rope=False, cross=False) - query (a QueryHead, nn.Linear with bias),
key WITHOUT bias, value and out with biases (Whisper's layout), q and k each multiplied by sqrt(qk_scale) and SDPA's
own 1 / sqrt(dh) (qk_scale 1 by default: the lesson's scale), optional ROTARY (rotate-half, base 10000, tables
cached as plain attributes by the first forward, for 2500 positions, from an inv_freq computed in float32),
forward(qx, q_positions, kvx, kv_positions, causal=False, mask=None): token POSITIONS required for queries and keys,
causality from the causal FLAG (SDPA is_causal) or an additive mask indexed by the positions; a KV cache made by
setup_kv_cache (k_cache / v_cache buffers written at kv_positions).

Source: https://github.com/collabora/WhisperSpeech (the wheel's METADATA Home-page), file whisperspeech/modules.py
as released in WhisperSpeech 0.8.9 on PyPI (generated from the project's notebook "A. Neural modules.ipynb");
ResidualAttentionBlock (same file) calls it as attn(lnx, x_positions, lnx, x_positions, causal=causal, mask=mask),
and BaseDecoder passes causal=self.training, mask=None while training and causal=False with its additive
triu(-inf) mask in eval.
Licence: MIT (LICENSE in the wheel's dist-info, "Copyright (c) 2023 Jakub Piotr Cłapa, Collabora Ltd."; METADATA
"License: MIT License"); the file says its code is mostly borrowed from openai/whisper's model.py, MIT.
Copied: verbatim from the PyPI wheel whisperspeech==0.8.9 (pip download --no-deps), every copied line compared by
program with the unpacked wheel: whisperspeech/modules.py lines 8-13 (imports), 32-33 (QueryHead) and 55-189
(MultiHeadAttention, Rotary, rotate_half, rope_rotate, with the notebook's cell markers and comments between them).
Left out: lines 1-7 and 14-31 (header, __all__, a commented-out import, LayerNorm, LinearHead), 34-54
(init_transformer, sinusoids) and 190-end (the blocks, decoders and embeddings).
ADDED: this docstring, the factory `build` (a self-attention call as ResidualAttentionBlock makes it while
training: the positions arange(n) for queries and keys, causal=True; rope=True) and the entry's constants.
Truth: bug (in _truth.py): the math is right - built with rope=True, called as build's forward does, =
rope_mha_forward (rotate-half, base 10000; query, key without bias, value and out) at relative 1e-7 (the frequencies
are computed in float32), no leak; rope=False = mha_forward to 3e-15; the eval call (causal=False with BaseDecoder's
additive triu(-inf) mask indexed by the positions) the same; causal=False without a mask leaks; qk_scale=4
multiplies every score by 4 - but Rotary caches its cos / sin tables as PLAIN attributes made by the first forward
on that input's device (`self.cos_cached = emb.cos()[None, :, None, :]`, 2500 positions, never rebuilt once made):
a module moved after a forward (validated on the CPU, then .cuda(); or .half()) keeps them behind and raises
("Tensor on device cpu is not on the expected device meta!" on PyTorch's meta device).  No catalogued mistake is
about a rotary cache (mask-no-device and the kept-mask ones are about the mask).
"""
import torch
import numpy as np
import math

from torch import Tensor, nn
import torch.nn.functional as F

class QueryHead(nn.Linear):
    pass


class MultiHeadAttention(nn.Module):
    def __init__(self, n_state: int, n_head: int, qk_scale: float = 1, rope: bool = False, cross=False):
        super().__init__()
        self.n_state = n_state
        self.n_head = n_head
        self.sqrt_qk_scale = math.sqrt(qk_scale)
        self.query = QueryHead(n_state, n_state)
        self.key = nn.Linear(n_state, n_state, bias=False)
        self.value = nn.Linear(n_state, n_state)
        self.out = nn.Linear(n_state, n_state)
        self.cross = cross
        self.query_subsampling = 1
        self.key_subsampling = 1

        self.cached_kvx = None
        self.register_buffer('k_cache', None)
        self.register_buffer('v_cache', None)
        
        self.rotary = None
        if rope:
            self.rotary = Rotary(n_state // n_head)
        self.qkv = None
        self.kv = None

    def setup_kv_cache(self, max_batch_size, max_seq_len, dtype=torch.float32):
        cache_shape = (max_batch_size, self.n_head, max_seq_len, self.n_state//self.n_head)
        self.k_cache = torch.zeros(cache_shape, dtype=dtype, device=self.key.weight.device)
        self.v_cache = torch.zeros(cache_shape, dtype=dtype, device=self.value.weight.device)

    def merge_linears(self, layers, mults):
        bias = [x.bias for x in layers if x.bias is not None][0]
        din, dout = layers[0].weight.shape
        new = nn.Linear(din, len(layers) * dout).to(layers[0].weight.device)
        with torch.no_grad():
            new.weight[:] = torch.cat([x.weight * m for x,m in zip(layers, mults)])
            new.bias[:] = torch.cat([torch.zeros_like(bias) if x.bias is None else x.bias * m for x, m in zip(layers, mults)])
        return new

    def convert_for_eval(self):
        if self.qkv or self.kv: raise AttributeError("already converted")
        
        self.odim = self.key.weight.shape[1]
        if self.cross:
            self.q = self.merge_linears([self.query], [self.sqrt_qk_scale])
            self.kv = self.merge_linears([self.key, self.value],
                                         [self.sqrt_qk_scale, 1])
        else:
            self.qkv = self.merge_linears([self.query, self.key, self.value],
                                          [self.sqrt_qk_scale, self.sqrt_qk_scale, 1])
        
    def split_heads(self, x, x_positions, rope=False, subsampling=1):
        x = x.view(*x.shape[:2], self.n_head, -1)
        if rope:
            x = rope_rotate(x, x_positions * subsampling, *self.rotary(x))
        return x.permute(0, 2, 1, 3)

    def forward(
        self,
        qx,
        q_positions,
        kvx,
        kv_positions,
        causal = False,
        mask=None,
    ):
        if self.k_cache is not None:
            assert qx.shape[0] <= self.k_cache.shape[0], "please pass in a larger max_batch_size to setup_kv_cache"
        if self.qkv:
            q,k,v = self.qkv(qx).split(self.odim, dim=-1)
        elif self.kv:
            q = self.q(qx)
            k,v = self.kv(kvx).split(self.odim, dim=-1)
        else:
            q,k,v = None,None,None
        
        if q is None: q = self.query(qx) * self.sqrt_qk_scale
        q = self.split_heads(q, q_positions, rope = self.rotary, subsampling = self.query_subsampling)

        if kvx is not self.cached_kvx:
            if k is None: k = self.key(kvx) * self.sqrt_qk_scale
            k = self.split_heads(k, kv_positions, rope = self.rotary, subsampling = self.key_subsampling)
            if v is None: v = self.value(kvx)
            v = self.split_heads(v, kv_positions)
            if self.k_cache is not None:
                self.k_cache[:k.shape[0],:,kv_positions] = k
                self.v_cache[:v.shape[0],:,kv_positions] = v

        if self.k_cache is not None:
            k, v = self.k_cache[:k.shape[0]], self.v_cache[:v.shape[0]]

        if mask is not None:
            mask = mask[q_positions,:k.shape[-2]]
            
        wv = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0, is_causal=causal)
        
        return self.out(wv.permute(0, 2, 1, 3).flatten(start_dim=2))

# %% ../nbs/A. Neural modules.ipynb 6
# modified from https://blog.eleuther.ai/rotary-embeddings/

import torch

class Rotary(torch.nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)
        self.seq_len_cached = None
        self.cos_cached = None
        self.sin_cached = None

    def forward(self, x, seq_dim=1):
        seq_len = x.shape[seq_dim]
        if not self.seq_len_cached or seq_len > self.seq_len_cached:
            self.seq_len_cached = 2500
            # self.seq_len_cached = seq_len
            
            t = torch.arange(self.seq_len_cached, device=x.device).type_as(self.inv_freq)
            freqs = torch.einsum("i,j->ij", t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1).to(x.device)
            self.cos_cached = emb.cos()[None, :, None, :]
            self.sin_cached = emb.sin()[None, :, None, :]
        return self.cos_cached, self.sin_cached


# rotary pos emb helpers:
def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat(
        (-x2, x1), dim=len(x.shape)-1
    )

def rope_rotate(x, positions, cos, sin):
    return x * cos[:,positions] + rotate_half(x) * sin[:,positions]



# --- added for the zoo: self-attention as ResidualAttentionBlock calls it while training (BaseDecoder: causal=True) ---
class _CausalSelfAttention(nn.Module):
    def __init__(self, n_state, n_head):
        super().__init__()
        self.attn = MultiHeadAttention(n_state, n_head, rope=True)

    def forward(self, x):
        positions = torch.arange(x.shape[1], device=x.device)
        return self.attn(x, positions, x, positions, causal=True)


def build(d_model, num_heads, context_length):
    return _CausalSelfAttention(d_model, num_heads)
# --- end of the added factory ---


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "bug"
BUG = "rotary-cache-stays-on-first-device"
RULE_GAPS = ("positions-required", "rotary-rotate-half", "rotary-tables-plain-attributes", "causal-flag-sdpa",
             "key-without-bias", "qk-scale-split", "no-divisibility-check", "no-context-length")
FORWARD = "qx, q_positions, kvx, kv_positions, causal=False, mask=None"
NOTES = ("MultiHeadAttention(n_state, n_head, qk_scale=1, rope=False, cross=False); the factory calls it as the "
         "decoder does while training, with rope=True.")
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the math is the lesson's with rotate-half rotary (reference-match proves it), but the rotary "
                    "tables cached by the first forward as plain attributes do not move with the module: mask-buffer "
                    "fails on the meta device; no catalogued mistake is about a rotary cache; divisibility besides")
