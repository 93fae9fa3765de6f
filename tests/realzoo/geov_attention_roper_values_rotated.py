# coding=utf-8
"""GeoV's GeoVAttention: RoPER, "Rotary Positional Embeddings with Relative distances" - rotate-half RoPE turns the
queries, the keys AND the values, and the attention output of each query is turned back by its own position
(apply_rotary_pos_emb_reverse), so each value enters rotated by the distance between its key and the query; fused qkv
split [Q; K; V] (tensor_split), einsum scores / sqrt(head_size), a tril bool buffer filled with finfo.min, dense
without bias; a GPT-NeoX-style HF layer: forward(hidden_states, attention_mask, head_mask=None, layer_past=None,
use_cache=False, output_attentions=False) -> (output, present); the cos/sin tables are plain attributes cached on
the first call in that call's dtype.

Source: https://github.com/geov-ai/geov (the wheel's METADATA Home-page), file geov/model.py as released in geov 0.0.2
on PyPI.
Licence: Apache-2.0 (the file's header: "Copyright 2022 EleutherAI The HuggingFace Inc. team", "Modifications
Copyright 2023 Better Planet Investments and labml.ai team", "Licensed under the Apache License, Version 2.0"; the
wheel's METADATA classifier "License :: OSI Approved :: Apache Software License"; the wheel has no licence file).
Copied: verbatim from the PyPI wheel geov==0.0.2 (pip download --no-deps): lines 1-22 of geov/model.py (header,
docstring, imports of math, typing, torch) and lines 76-242 (GeoVAttention, RotaryEmbedding, rotate_half,
apply_rotary_pos_emb, apply_rotary_pos_emb_reverse). Its imports of the package's GeoVConfig and of transformers
serve the classes left out.
ADDED: this entry's constants, and below the copied block a factory geov_attention(hidden_size,
num_attention_heads, max_position_embeddings) that passes the four settings GeoVAttention reads (rotary_emb_base
10000, GeoVConfig's default) in a SimpleNamespace, where the model passes its GeoVConfig.
Truth: correct as RoPER, not the lesson's layer: output[i] = dense(merge_h(R_i^-1 sum_j a_ij R_j v_j)), a_ij the
causal softmax of (R_i q_i) . (R_j k_j) / sqrt(head_size), R_t the rotate-half rotation by position t; proven in
_truth.py against that formula written independently (relative 1e-5: the tables are float32 when the first call is),
no leak; the rotate-half rotary reference (values not turned) differs from it by about 1. No reference of
mha-check's reproduces it: the true verdict is cannot_tell, never a failure.
"""
# Copyright 2022 EleutherAI The HuggingFace Inc. team. All rights reserved.
# Modifications Copyright 2023 Better Planet Investments and labml.ai team. ALl rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
""" PyTorch GeoV model."""
import math
from typing import Optional, Tuple, Union

import torch
import torch.utils.checkpoint
from torch import nn

TARGET = "GeoVAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("roper-values-rotated-output-unrotated", "config-object", "required-attention-mask-arg", "tuple-output",
             "rope-cache-plain-attributes")
FORWARD = "hidden_states, attention_mask, head_mask=None, layer_past=None, use_cache=False, output_attentions=False"
NOTES = ("GeoVAttention(config with hidden_size, num_attention_heads, max_position_embeddings, rotary_emb_base). "
         "forward(x, None) -> (y, present); RoPE on q, k and v, inverse RoPE on the attention output.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("a causal layer with a rotary variant no reference has (values turned, outputs turned back): "
                    "nothing reproduces it, so no check of the math can fail or pass it")


class GeoVAttention(nn.Module):
    """
    Attention module
    """

    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.hidden_size = config.hidden_size
        self.head_size = self.hidden_size // self.num_attention_heads
        max_positions = config.max_position_embeddings
        self.register_buffer("causal_mask", torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)))
        self.rotary_emb = RotaryEmbedding(self.head_size, base=config.rotary_emb_base)
        self.qkv = nn.Linear(config.hidden_size, 3 * config.hidden_size)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=False)

    def forward(
            self,
            hidden_states: torch.FloatTensor,
            attention_mask: torch.FloatTensor,
            head_mask: Optional[torch.FloatTensor] = None,
            layer_past: Optional[Tuple[torch.Tensor]] = None,
            use_cache: Optional[bool] = False,
            output_attentions: Optional[bool] = False,
    ):
        has_layer_past = layer_past is not None

        # Compute QKV
        # Attention heads [batch, seq_len, hidden_size]
        #   --> [batch, seq_len, (np * 3 * head_size)]
        qkv = self.qkv(hidden_states)
        query, key, value = torch.tensor_split(qkv, 3, dim=-1)

        # 'b l (h q) -> b h l q'
        query = self._split_heads(query, self.num_attention_heads)
        key = self._split_heads(key, self.num_attention_heads)
        value = self._split_heads(value, self.num_attention_heads)

        # Compute token offset for rotary embeddings (when decoding)
        seq_len = key.shape[-2]
        offset = 0
        if has_layer_past:
            offset = layer_past[0].shape[-2]
            seq_len += offset

        cos, sin = self.rotary_emb(query, seq_len=seq_len)
        query = apply_rotary_pos_emb(query, cos, sin, offset=offset)
        key = apply_rotary_pos_emb(key, cos, sin, offset=offset)
        value = apply_rotary_pos_emb(value, cos, sin, offset=offset)

        # Cache QKV values
        if has_layer_past:
            past_key = layer_past[0]
            past_value = layer_past[1]
            key = torch.cat((past_key, key), dim=-2)
            value = torch.cat((past_value, value), dim=-2)
        present = (key, value) if use_cache else None

        # Compute attention
        attn_output, attn_weights = self._attn(query, key, value, attention_mask, head_mask)

        attn_output = apply_rotary_pos_emb_reverse(attn_output, cos, sin, offset=offset)

        # Reshape outputs
        attn_output = self._merge_heads(attn_output)
        attn_output = self.dense(attn_output)

        outputs = (attn_output, present)
        if output_attentions:
            outputs += (attn_weights,)

        return outputs

    @classmethod
    def _split_heads(cls, tensor, num_attention_heads):
        """
        Splits hidden dim into num_attention_heads
        """
        # tensor: [bs, seq_len, hidden_size]
        new_shape = tensor.shape[:-1] + (num_attention_heads, tensor.shape[-1] // num_attention_heads)
        # -> [bs, seq_len, num_attention_heads, attn_head_size]
        tensor = tensor.view(new_shape)
        # -> [bs, num_attention_heads, seq_len, attn_head_size]
        tensor = tensor.permute(0, 2, 1, 3)
        return tensor

    @classmethod
    def _merge_heads(cls, tensor):
        """
        Merges heads
        """
        # tensor [bs, num_attention_heads, seq_len, attn_head_size]
        tensor = tensor.permute(0, 2, 1, 3).contiguous()
        # -> [bs, seq_len, num_attention_heads, attn_head_size]
        tensor = tensor.view(*tensor.shape[:2], tensor.shape[2] * tensor.shape[3])
        # -> [bs, seq_len, hidden_size]
        return tensor

    def _attn(self, query, key, value, attention_mask=None, head_mask=None):
        # q, k, v: [bs, num_attention_heads, seq_len, attn_head_size]
        # compute causal mask from causal mask buffer
        batch_size, num_attention_heads, query_length, attn_head_size = query.shape
        key_length = key.shape[-2]

        causal_mask = self.causal_mask[None, None, key_length - query_length: key_length, :key_length]

        attn_scores = torch.einsum("bhid,bhjd->bhij", query, key) / math.sqrt(attn_head_size)

        attn_scores.masked_fill_(causal_mask == 0, torch.finfo(attn_scores.dtype).min)

        if attention_mask is not None:
            # Apply the attention mask
            attn_scores = attn_scores + attention_mask

        attn_weights = nn.functional.softmax(attn_scores, dim=-1)

        # Mask heads if we want to
        if head_mask is not None:
            attn_weights = attn_weights * head_mask

        attn_output = torch.matmul(attn_weights, value)
        return attn_output, attn_weights


class RotaryEmbedding(torch.nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq)

        self.max_seq_len_cached = -1

    def forward(self, x, seq_len=None):
        # x: [bs, num_attention_heads, seq_len, head_size]
        # This `if` block is unlikely to be run after we build sin/cos in `__init__`. Keep the logic here just in case.
        if seq_len > self.max_seq_len_cached:
            self.max_seq_len_cached = seq_len
            t = torch.arange(self.max_seq_len_cached, device=x.device, dtype=self.inv_freq.dtype)
            freqs = torch.einsum("i,j->ij", t, self.inv_freq)
            # Different from paper, but it uses a different permutation in order to obtain the same calculation
            emb = torch.cat((freqs, freqs), dim=-1).to(x.device)
            self.cos_cached = emb.cos()[None, None, :, :].to(x.dtype)
            self.sin_cached = emb.sin()[None, None, :, :].to(x.dtype)
        return self.cos_cached.to(x.device), self.sin_cached.to(x.device)


def rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, cos, sin, offset: int = 0):
    """Apply positional embeddings"""
    cos = cos[..., offset: q.shape[-2] + offset, :]
    sin = sin[..., offset: q.shape[-2] + offset, :]
    q_embed = (q * cos) + (rotate_half(q) * sin)
    return q_embed


def apply_rotary_pos_emb_reverse(q, cos, sin, offset: int = 0):
    """Apply positional embeddings in reverse"""
    cos = cos[..., offset: q.shape[-2] + offset, :]
    sin = sin[..., offset: q.shape[-2] + offset, :]
    q_embed = (q * cos) - (rotate_half(q) * sin)
    return q_embed


# --- ADDED for the zoo: the four settings GeoVAttention reads, as GeoVConfig holds them ---
def geov_attention(hidden_size, num_attention_heads, max_position_embeddings):
    import types

    config = types.SimpleNamespace(hidden_size=hidden_size, num_attention_heads=num_attention_heads,
                                   max_position_embeddings=max_position_embeddings, rotary_emb_base=10000)
    return GeoVAttention(config)
