"""stable-audio-tools 0.0.19's Attention (Stability AI's audio diffusion transformer, "Copied and modified from
lucidrains/x-transformers"): Attention(dim, dim_heads=64, dim_context=None, causal=False, zero_init_output=True,
qk_norm='none', differential=False, feat_scale=False) - the constructor takes the HEAD WIDTH, not the number of heads
(num_heads = dim // dim_heads, no check that it divides); one fused to_qkv Linear(dim, 3 * dim) without bias chunked
into [Q; K; V], einops rearrange 'b n (h d) -> b h n d', to_out without bias ZEROED at construction
(zero_init_output=True by default), causality by a constructor FLAG (or forward's causal=), given to
F.scaled_dot_product_attention(is_causal=causal) when flash-attn is absent; the flag is turned off for a single token;
optional qk-norm (l2, LayerNorm, DynamicTanh), a differential-attention variant, rotary, FlexAttention and a
sliding window through flash-attn.

Source: https://github.com/Stability-AI/stable-audio-tools (the wheel's METADATA Home-page), file
stable_audio_tools/models/transformer.py as released in stable-audio-tools 0.0.19 on PyPI; TransformerBlock (same
file) builds it as Attention(dim, dim_heads=self.dim_heads, causal=causal, zero_init_output=zero_init_branch_outputs).
Licence: MIT (LICENSE in the wheel's dist-info/licenses, "MIT License / Copyright (c) 2023 Stability AI"; the file's
comment credits lucidrains/x-transformers, MIT).
Copied: verbatim from the PyPI wheel stable-audio-tools==0.0.19 (pip download --no-deps), every copied line compared
by program with the unpacked wheel: transformer.py lines 5-10 (the torch and typing imports, FlexAttention's),
stable_audio_tools/models/utils.py lines 47-58 (the `compile` decorator: identity unless ENABLE_TORCH_COMPILE=1) and
transformer.py lines 328-543 (class Attention, whole).  Left out: transformer.py lines 1-4 (functools, einops),
11-20 (flash-attn's import, whose ImportError branch sets flash_attn_func = None, and the relative import of compile),
21-327 (torch.compile of flex_attention, which only the FlexAttention path reads, the positional embeddings,
rotary's apply_rotary_pos_emb, DynamicTanh - neither reached with qk_norm='none' and no rotary_pos_emb) and 544-end.
ADDED: this docstring, the einops shim (two patterns; the real einops when installed), `flash_attn_func = None` (as
the wheel's ImportError branch sets it where flash-attn is not installed) and the entry's constants.
Truth: correct (in _truth.py): Attention(12, dim_heads=4, causal=True) in eval() with its weights randomised (to_out
is all zeros as built: the layer's output is 0 until trained) = mha_forward with 3 heads (to_qkv's row blocks, to_out,
no biases) and the per-head loop to 1e-15, no leak; built with causal=False, or called with causal=False, the
future moves the past; forward(x, causal=True) on a causal=False layer = the causal output.
"""
import torch
import torch.nn.functional as F
from torch import nn, einsum
from torch.amp import autocast
from typing import Callable, Literal
from torch.nn.attention.flex_attention import flex_attention

# --- added for the zoo: a shim for `from einops import rearrange` (the real einops when installed) ---
try:
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        pattern = ' '.join(pattern.split())  # the wheel writes ' b h n d -> b n (h d)' with a leading space
        if pattern == 'b n (h d) -> b h n d':
            b, n, hd = t.shape
            return t.reshape(b, n, axes['h'], hd // axes['h']).permute(0, 2, 1, 3)
        if pattern == 'b h n d -> b n (h d)':
            b, h, n, d = t.shape
            return t.permute(0, 2, 1, 3).reshape(b, n, h * d)
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')
flash_attn_func = None  # the wheel's `except ImportError` branch where flash-attn is not installed
# --- end of the added shim ---

import os
enable_torch_compile = os.environ.get("ENABLE_TORCH_COMPILE", "0") == "1"

def compile(function, *args, **kwargs):
    
    if enable_torch_compile:
        try:
            return torch.compile(function, *args, **kwargs)
        except RuntimeError:
            return function

    return function


class Attention(nn.Module):
    def __init__(
        self,
        dim,
        dim_heads = 64,
        dim_context = None,
        causal = False,
        zero_init_output=True,
        qk_norm: Literal['l2', 'ln', 'dyt', 'none'] = 'none',
        differential = False,
        feat_scale = False
    ):
        super().__init__()
        self.dim = dim
        self.dim_heads = dim_heads

        self.differential = differential

        dim_kv = dim_context if dim_context is not None else dim
        
        self.num_heads = dim // dim_heads
        self.kv_heads = dim_kv // dim_heads

        if dim_context is not None:
            if differential:
                self.to_q = nn.Linear(dim, dim * 2, bias=False)
                self.to_kv = nn.Linear(dim_kv, dim_kv * 3, bias=False)
            else:
                self.to_q = nn.Linear(dim, dim, bias=False)
                self.to_kv = nn.Linear(dim_kv, dim_kv * 2, bias=False)
        else:
            if differential:
                self.to_qkv = nn.Linear(dim, dim * 5, bias=False)
            else:
                self.to_qkv = nn.Linear(dim, dim * 3, bias=False)

        self.to_out = nn.Linear(dim, dim, bias=False)

        if zero_init_output:
            nn.init.zeros_(self.to_out.weight)

        if qk_norm not in ['l2', 'ln', 'dyt','none']:
            raise ValueError(f'qk_norm must be one of ["l2", "ln", "none"], got {qk_norm}')
            
        self.qk_norm = qk_norm

        if self.qk_norm == "ln":
            self.q_norm = nn.LayerNorm(dim_heads, elementwise_affine=True, eps=1.0e-6)
            self.k_norm = nn.LayerNorm(dim_heads, elementwise_affine=True, eps=1.0e-6)
        elif self.qk_norm == 'dyt':
            self.q_norm = DynamicTanh(dim_heads)
            self.k_norm = DynamicTanh(dim_heads)

        self.sdp_kwargs = dict(
            enable_flash = True,
            enable_math = True,
            enable_mem_efficient = True
        )

        self.feat_scale = feat_scale

        if self.feat_scale:
            self.lambda_dc = nn.Parameter(torch.zeros(dim))
            self.lambda_hf = nn.Parameter(torch.zeros(dim))

        self.causal = causal
        if causal:
            print('Using `causal` argument disables FlexAttention. If you want to use them together, incorporate causal masking into `flex_attention_block_mask`.')

    @compile
    def apply_qk_layernorm(self, q, k):
        q_type = q.dtype
        k_type = k.dtype
        q = self.q_norm(q).to(q_type)
        k = self.k_norm(k).to(k_type)
        return q, k


    def apply_attn(self, q, k, v, causal = None, flex_attention_block_mask = None, flex_attention_score_mod = None, flash_attn_sliding_window = None):

        if self.num_heads != self.kv_heads:
             # Repeat interleave kv_heads to match q_heads for grouped query attention
             heads_per_kv_head = self.num_heads // self.kv_heads
             k, v = map(lambda t: t.repeat_interleave(heads_per_kv_head, dim = 1), (k, v))

        flash_attn_available = flash_attn_func is not None
        if flash_attn_sliding_window is not None and (not flash_attn_available):
            print(f"Cannot use FlashAttention sliding window as FlashAttention is disabled or not available")

        if (flex_attention_block_mask is not None or flex_attention_score_mod is not None) and flash_attn_sliding_window is not None:
            print(f"cannot use both FlashAttention and FlexAttention, favouring FlexAttention")

        if causal and (flex_attention_block_mask is not None or flex_attention_score_mod is not None):
            print(f"Disabling FlexAttention because causal is set")
            flex_attention_block_mask = None
            flex_attention_score_mod = None

        if flex_attention_block_mask is not None or flex_attention_score_mod is not None:
            out = flex_attention_compiled(q,k,v,
                block_mask = flex_attention_block_mask,
                score_mod = flex_attention_score_mod)        
        elif flash_attn_available:
            fa_dtype_in = q.dtype
            q, k, v = map(lambda t: rearrange(t, 'b h n d -> b n h d'), (q, k, v))

            if fa_dtype_in != torch.float16 and fa_dtype_in != torch.bfloat16:
                q, k, v = map(lambda t: t.to(torch.float16), (q, k, v))
            
            out = flash_attn_func(q, k, v, causal = causal, window_size=flash_attn_sliding_window if (flash_attn_sliding_window is not None) else [-1,-1])
            
            out = rearrange(out.to(fa_dtype_in), 'b n h d -> b h n d')
        else:
            out = F.scaled_dot_product_attention(q, k, v, is_causal = causal)
        return out


    #@compile
    def forward(
        self,
        x,
        context = None,
        rotary_pos_emb = None,
        causal = None, 
        flex_attention_block_mask = None,
        flex_attention_score_mod = None,
        flash_attn_sliding_window = None
    ):
        h, kv_h, has_context = self.num_heads, self.kv_heads, context is not None

        kv_input = context if has_context else x

        if hasattr(self, 'to_q'):
            # Use separate linear projections for q and k/v
            if self.differential:
                q, q_diff = self.to_q(x).chunk(2, dim=-1)
                q, q_diff = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, q_diff))
                q = torch.stack([q, q_diff], dim = 1)
                k, k_diff, v = self.to_kv(kv_input).chunk(3, dim=-1)
                k, k_diff, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = kv_h), (k, k_diff, v))
                k = torch.stack([k, k_diff], dim = 1)
            else:
                q = self.to_q(x)
                q = rearrange(q, 'b n (h d) -> b h n d', h = h)
                k, v = self.to_kv(kv_input).chunk(2, dim=-1)
                k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = kv_h), (k, v))
        else:
            # Use fused linear projection
            if self.differential:
                q, k, v, q_diff, k_diff = self.to_qkv(x).chunk(5, dim=-1)
                q, k, v, q_diff, k_diff  = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, k, v, q_diff, k_diff))
                q = torch.stack([q, q_diff], dim = 1)
                k = torch.stack([k, k_diff], dim = 1)
            else:
                q, k, v = self.to_qkv(x).chunk(3, dim=-1)
                q, k, v = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h = h), (q, k, v))

        # Normalize q and k for cosine sim attention
        if self.qk_norm == "l2":
            q = F.normalize(q, dim=-1)
            k = F.normalize(k, dim=-1)
        elif self.qk_norm != "none":
            q, k = self.apply_qk_layernorm(q, k)

        if rotary_pos_emb is not None:
            freqs, _ = rotary_pos_emb
            q_dtype = q.dtype
            k_dtype = k.dtype
            q = q.to(torch.float32)
            k = k.to(torch.float32)
            freqs = freqs.to(torch.float32)
            if q.shape[-2] >= k.shape[-2]:
                ratio = q.shape[-2] / k.shape[-2]
                q_freqs, k_freqs = freqs, ratio * freqs
            else:
                ratio = k.shape[-2] / q.shape[-2]
                q_freqs, k_freqs = ratio * freqs, freqs
            q = apply_rotary_pos_emb(q, q_freqs)
            k = apply_rotary_pos_emb(k, k_freqs)
            q = q.to(v.dtype)
            k = k.to(v.dtype)
        
        n, device = q.shape[-2], q.device

        causal = self.causal if causal is None else causal

        if n == 1 and causal:
            causal = False

        if self.differential:
            q, q_diff = q.unbind(dim = 1)
            k, k_diff = k.unbind(dim = 1)
            out = self.apply_attn(q, k, v,  causal = causal, flex_attention_block_mask = flex_attention_block_mask, flex_attention_score_mod = flex_attention_score_mod, flash_attn_sliding_window = flash_attn_sliding_window)
            out_diff = self.apply_attn(q_diff, k_diff, v, causal = causal, flex_attention_block_mask = flex_attention_block_mask, flex_attention_score_mod = flex_attention_score_mod, flash_attn_sliding_window = flash_attn_sliding_window)
            out = out - out_diff
        else:
            out = self.apply_attn(q, k, v, causal = causal, flex_attention_block_mask = flex_attention_block_mask, flex_attention_score_mod = flex_attention_score_mod, flash_attn_sliding_window = flash_attn_sliding_window)

        # merge heads
        out = rearrange(out, ' b h n d -> b n (h d)')

        # Communicate between heads
        
        # with autocast(enabled = False):
        #     out_dtype = out.dtype
        #     out = out.to(torch.float32)
        #     out = self.to_out(out).to(out_dtype)
        out = self.to_out(out)

        if self.feat_scale:
            out_dc = out.mean(dim=-2, keepdim=True)
            out_hf = out - out_dc

            # Selectively modulate DC and high frequency components
            out = out + self.lambda_dc * out_dc + self.lambda_hf * out_hf

        return out

# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "Attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("head-width-argument", "causal-only-with-flag", "zero-initialised-out-proj", "no-biases",
             "no-divisibility-check", "no-context-length")
FORWARD = ("x, context=None, rotary_pos_emb=None, causal=None, flex_attention_block_mask=None, "
           "flex_attention_score_mod=None, flash_attn_sliding_window=None")
NOTES = ("Attention(dim, dim_heads=64, ..., causal=False, zero_init_output=True, ...): heads = dim // dim_heads; causal "
         "only with the flag (constructor or forward); to_out zeroed at construction.")
OUTCOME = 'rules'
DIAGNOSIS = 'out-proj-no-bias'
EXPECTED_BECAUSE = ("built as Attention(dim, dim_heads=dim // heads, causal=True): the lesson's layer (to_qkv [Q; K; "
                    "V], to_out, SDPA is_causal) with no biases and no divisibility check; dim_context is the width "
                    "of a cross-attention context, left at None (read as the context length before Realzoo23's fix, "
                    "it built a cross-attention layer and output-shape failed)")
