"""mqa 0.1.0's MultiQueryAttention: MosaicML's MPT multi-query attention (llm-foundry's attention.py) as packaged on
PyPI as "Multi Query Attention package" - MultiQueryAttention(d_model, n_heads, attn_impl='triton', clip_qkv=None,
qk_ln=False, softmax_scale=None, attn_pdrop=0.0, ...), ONE fused Wqkv of d_model + 2 * head_dim rows split
[Q; K; V] with ONE key/value head shared by every query head, the pure-torch path
scaled_multihead_dot_product_attention (keys kept transposed (b, h, d, s), a causal bool mask built from
max(s_q, s_k) and cut [-s_q:, -s_k:], filled with finfo.min, an optional additive attn_bias and a key padding mask),
an MPT-style KV cache `past_key_value` (a started cache is an empty tuple or list; None means no cache), biases on
both Linears; forward returns (out, attn_weights or None, past_key_value).

Source: https://pypi.org/project/mqa/ 0.1.0 (author kyegomez; the wheel names no repository), file mqa/main.py as
released in mqa 0.1.0; its code is MosaicML's llm-foundry llmfoundry/models/layers/attention.py (Apache-2.0).
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2023 Eternal
Reclaimer"); the code it copies is llm-foundry's, Apache-2.0 (Copyright 2022 MosaicML LLM Foundry authors).
Permissive either way.
Copied: verbatim from the PyPI wheel mqa==0.1.0 (pip download --no-deps): lines 1-2 and 5-6 of mqa/main.py
(imports), lines 116-119 (FC_CLASS_REGISTRY), lines 131-237 (_reset_is_causal, scaled_multihead_dot_product_attention)
and lines 646-769 (MultiQueryAttention).  REPLACED: line 3, `from typings import Optional` (no module "typings": the
published module raises ModuleNotFoundError on import), by `from typing import Optional`; line 7, `from einops import
rearrange`, by the shim.  Left out: lines 122-129 NORM_CLASS_REGISTRY (written `Dict(str, Type[nn.Module])`, a call
that raises TypeError at import too; used only with qk_ln=True), LPLayerNorm (nn.Module given LayerNorm's arguments),
the RMSNorm classes, the flash and triton paths (they import flash_attn / triton), the alibi helpers,
MultiHeadAttention.
ADDED: the rearrange shim, this entry's constants, and the factory make_mpt_mqa(d, heads, context_length) =
MultiQueryAttention(d, heads, attn_impl='torch') (the default 'triton' needs the triton flash-attention kernel).
Truth: correct. Through the factory, out = grouped-query attention with ONE key/value head (W_k, W_v = Wqkv rows
d:d+dh and d+dh:d+2dh, every query head reads it) and Wqkv's and out_proj's biases, = gqa_forward and an independent
per-head loop, no leak; a prompt then 2 tokens then 1 with past_key_value=() started = the whole sequence (in
_truth.py).  As published the module cannot be imported (the two lines above).
"""
import math
import warnings
from typing import Optional  # line 3 was: from typings import Optional
import torch 
import torch.nn as nn

# --- added for the zoo: a shim for `from einops import rearrange` (the real einops when installed) ---
try:
    from einops import rearrange
except ImportError:  # pragma: no cover - depends on the environment
    def rearrange(t, pattern, **axes):
        b = t.shape[0]
        if pattern == 'b s (h d) -> b h s d':
            h = axes['h']
            return t.reshape(b, t.shape[1], h, t.shape[2] // h).permute(0, 2, 1, 3)
        if pattern == 'b s (h d) -> b h d s':
            h = axes['h']
            return t.reshape(b, t.shape[1], h, t.shape[2] // h).permute(0, 2, 3, 1)
        if pattern == 'b h s d -> b s (h d)':
            return t.permute(0, 2, 1, 3).reshape(b, t.shape[2], t.shape[1] * t.shape[3])
        raise NotImplementedError(f'rearrange shim: pattern {pattern!r} not supported')
# --- end of shim ---

TARGET = "make_mpt_mqa"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("multi-query-one-kv-head", "fused-wqkv-d-plus-2dh", "attn-impl-registry", "keys-stored-transposed",
             "finfo-min-fill", "past-key-value-empty-tuple-starts", "tuple-output-3", "no-context-length")
FORWARD = "x, past_key_value=None, attn_bias=None, attention_mask=None, is_causal=True, needs_weights=False"
NOTES = ("make_mpt_mqa(d, heads, context_length) = MultiQueryAttention(d, heads, attn_impl='torch'); forward returns "
         "(out, None, past_key_value)")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = ("correct multi-query attention (one shared key/value head, biases) with an MPT cache started by an "
                    "empty tuple; nothing refuses a width the heads do not divide (head_dim = d_model // n_heads)")

#Registers
FC_CLASS_REGISTRY = {
    'torch': nn.Linear,
}


def _reset_is_causal(num_query_tokens: int, num_key_tokens: int,
                     original_is_causal: bool):
    # disable causal when it is not needed
    # necessary for flash & triton for generation with kv_cache
    if original_is_causal and num_query_tokens != num_key_tokens:
        if num_query_tokens != 1:
            raise NotImplementedError(
                'MPT does not support query and key with different number of tokens, unless number of query tokens is 1.'
            )
        else:
            return False
    return original_is_causal


def scaled_multihead_dot_product_attention(
    query,
    key,
    value,
    n_heads,
    past_key_value=None,
    softmax_scale=None,
    attn_bias=None,
    key_padding_mask=None,
    is_causal=False,
    dropout_p=0.0,
    training=False,
    needs_weights=False,
    multiquery=False,
):
    q = rearrange(query, 'b s (h d) -> b h s d', h=n_heads)
    kv_n_heads = 1 if multiquery else n_heads
    k = rearrange(key, 'b s (h d) -> b h d s', h=kv_n_heads)
    v = rearrange(value, 'b s (h d) -> b h s d', h=kv_n_heads)

    if past_key_value is not None:
        # attn_impl: flash & triton use kernels which expect input shape [b, s, h, d_head].
        # kv_cache is therefore stored using that shape.
        # attn_impl: torch stores the kv_cache in the ordering which is most advantageous
        # for its attn computation ie
        # keys are stored as tensors with shape [b, h, d_head, s] and
        # values are stored as tensors with shape [b, h, s, d_head]
        if len(past_key_value) != 0:
            k = torch.cat([past_key_value[0], k], dim=3)
            v = torch.cat([past_key_value[1], v], dim=2)

        past_key_value = (k, v)

    b, _, s_q, d = q.shape
    s_k = k.size(-1)

    if softmax_scale is None:
        softmax_scale = 1 / math.sqrt(d)

    attn_weight = q.matmul(k) * softmax_scale

    if attn_bias is not None:
        # clamp to 0 necessary for torch 2.0 compile()
        _s_q = max(0, attn_bias.size(2) - s_q)
        _s_k = max(0, attn_bias.size(3) - s_k)
        attn_bias = attn_bias[:, :, _s_q:, _s_k:]

        if (attn_bias.size(-1) != 1 and
                attn_bias.size(-1) != s_k) or (attn_bias.size(-2) != 1 and
                                               attn_bias.size(-2) != s_q):
            raise RuntimeError(
                f'attn_bias (shape: {attn_bias.shape}) is expected to broadcast to shape: {attn_weight.shape}.'
            )
        attn_weight = attn_weight + attn_bias

    min_val = torch.finfo(q.dtype).min

    if key_padding_mask is not None:
        if attn_bias is not None:
            warnings.warn(
                'Propogating key_padding_mask to the attention module ' +\
                'and applying it within the attention module can cause ' +\
                'unneccessary computation/memory usage. Consider integrating ' +\
                'into attn_bias once and passing that to each attention ' +\
                'module instead.'
            )
        attn_weight = attn_weight.masked_fill(
            ~key_padding_mask.view((b, 1, 1, s_k)), min_val)

    if is_causal and (not q.size(2) == 1):
        s = max(s_q, s_k)
        causal_mask = attn_weight.new_ones(s, s, dtype=torch.float32)
        causal_mask = causal_mask.tril()
        causal_mask = causal_mask.to(torch.bool)
        causal_mask = ~causal_mask
        causal_mask = causal_mask[-s_q:, -s_k:]
        attn_weight = attn_weight.masked_fill(causal_mask.view(1, 1, s_q, s_k),
                                              min_val)

    attn_weight = torch.softmax(attn_weight, dim=-1)

    if dropout_p:
        attn_weight = torch.nn.functional.dropout(attn_weight,
                                                  p=dropout_p,
                                                  training=training,
                                                  inplace=True)

    out = attn_weight.to(v.dtype).matmul(v)
    out = rearrange(out, 'b h s d -> b s (h d)')

    if needs_weights:
        return out, attn_weight, past_key_value
    return out, None, past_key_value

class MultiQueryAttention(nn.Module):
    """Multi-Query self attention.

    Using torch or triton attention implemetation enables user to also use
    additive bias.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        attn_impl: str = 'triton',
        clip_qkv: Optional[float] = None,
        qk_ln: bool = False,
        softmax_scale: Optional[float] = None,
        attn_pdrop: float = 0.0,
        norm_type: str = 'low_precision_layernorm',
        fc_type: str = 'torch',
        verbose: int = 0,
        device: Optional[str] = None,
    ):
        super().__init__()

        self.attn_impl = attn_impl
        self.clip_qkv = clip_qkv
        self.qk_ln = qk_ln

        self.d_model = d_model
        self.n_heads = n_heads
        self.head_dim = d_model // n_heads
        self.softmax_scale = softmax_scale
        if self.softmax_scale is None:
            self.softmax_scale = 1 / math.sqrt(self.head_dim)
        self.attn_dropout_p = attn_pdrop

        fc_kwargs = {}
        if fc_type != 'te':
            fc_kwargs['device'] = device
        # - vchiley
        self.Wqkv = FC_CLASS_REGISTRY[fc_type](
            d_model,
            d_model + 2 * self.head_dim,
            **fc_kwargs,
        )
        # for param init fn; enables shape based init of fused layers
        fuse_splits = (d_model, d_model + self.head_dim)
        self.Wqkv._fused = (0, fuse_splits)  # type: ignore

        if self.qk_ln:
            norm_class = NORM_CLASS_REGISTRY[norm_type.lower()]
            self.q_ln = norm_class(d_model, device=device)
            self.k_ln = norm_class(self.head_dim, device=device)

        if self.attn_impl == 'flash':
            self.attn_fn = flash_attn_fn
        elif self.attn_impl == 'triton':
            self.attn_fn = triton_flash_attn_fn
            if verbose:
                warnings.warn(
                    'While `attn_impl: triton` can be faster than `attn_impl: flash` ' +\
                    'it uses more memory. When training larger models this can trigger '  +\
                    'alloc retries which hurts performance. If encountered, we recommend ' +\
                    'using `attn_impl: flash` if your model does not use `alibi` or `prefix_lm`.'
                )
        elif self.attn_impl == 'torch':
            self.attn_fn = scaled_multihead_dot_product_attention
            if torch.cuda.is_available() and verbose:
                warnings.warn(
                    'Using `attn_impl: torch`. If your model does not use `alibi` or ' +\
                    '`prefix_lm` we recommend using `attn_impl: flash` otherwise ' +\
                    'we recommend using `attn_impl: triton`.'
                )
        else:
            raise ValueError(f'{attn_impl=} is an invalid setting.')

        self.out_proj = FC_CLASS_REGISTRY[fc_type](
            self.d_model,
            self.d_model,
            **fc_kwargs,
        )
        self.out_proj._is_residual = True  # type: ignore

    def forward(
        self,
        x,
        past_key_value=None,
        attn_bias=None,
        attention_mask=None,
        is_causal=True,
        needs_weights=False,
    ):
        qkv = self.Wqkv(x)

        if self.clip_qkv:
            qkv = qkv.clamp(min=-self.clip_qkv, max=self.clip_qkv)

        query, key, value = qkv.split(
            [self.d_model, self.head_dim, self.head_dim], dim=2)

        key_padding_mask = attention_mask

        if self.qk_ln:
            # Applying layernorm to qk
            dtype = query.dtype
            query = self.q_ln(query).to(dtype)
            key = self.k_ln(key).to(dtype)

        context, attn_weights, past_key_value = self.attn_fn(
            query,
            key,
            value,
            self.n_heads,
            past_key_value=past_key_value,
            softmax_scale=self.softmax_scale,
            attn_bias=attn_bias,
            key_padding_mask=key_padding_mask,
            is_causal=is_causal,
            dropout_p=self.attn_dropout_p,
            training=self.training,
            needs_weights=needs_weights,
            multiquery=True,
        )

        return self.out_proj(context), attn_weights, past_key_value


# --- added for the zoo: the factory (the torch path; the default 'triton' needs the triton kernel) ---
def make_mpt_mqa(d, heads, context_length=None):
    return MultiQueryAttention(d, heads, attn_impl='torch')
