"""TimesFM 2.5's MultiHeadAttention (Google's time-series foundation model, PyTorch port; two-space indentation): a
decoder-only causal layer over patches - one fused qkv_proj without bias (fuse_qkv=True in the 2.5 config) chunked
[Q; K; V] and viewed (B, n, H, dh), rotate-half RoPE with timescales 10000 ** (2i / dh) on q and k, then an RMSNorm
of its own on q and on k over the head width (qk_norm="rms": x * rsqrt(mean(x^2) + 1e-6) * scale, scale a parameter
initialised to ZEROS and multiplied directly), then a LEARNED per-dimension scale on q instead of 1/sqrt(dh)
(q * 1.442695041 / sqrt(dh) * softplus(per_dim_scale), i.e. exactly 1/sqrt(dh) at its zero initialisation), and
F.scaled_dot_product_attention(scale=1.0) with a bool mask made from positions (query >= key, minus the masked
padding patches). KEYWORD-ONLY forward(inputs_q, *, decode_cache=None, patch_mask=None) -> (out, decode_cache).

Source: https://pypi.org/project/timesfm/ (timesfm 3.0.2; the wheel's METADATA names no repository), files
timesfm/torch/transformer.py, timesfm/torch/normalization.py and timesfm/torch/util.py as released in timesfm 3.0.2.
Licence: Apache-2.0 (the wheel's METADATA "License: Apache-2.0", the LICENSE in its dist-info/licenses, and each
file's header "Copyright 2025 Google LLC").
Copied: verbatim from the PyPI wheel timesfm==3.0.2 (pip download --no-deps): lines 1-22 of timesfm/torch/
transformer.py (header and imports), lines 27-29 (the aliases), lines 32-166 (make_attn_mask, RotaryPositionalEmbedding,
the two attention functions, PerDimScale) and 169-304 (MultiHeadAttention); from timesfm/torch/normalization.py lines
21-39 (RMSNorm); from timesfm/torch/util.py lines 17-18 and 23-30 (DecodeCache). Lines 23-25 of transformer.py (`from
.. import configs`, `from . import normalization, util`) are replaced by the namespaces below.
ADDED: the namespaces `normalization` and `util` holding the copied RMSNorm and DecodeCache, this entry's constants
and the factory `timesfm_2p5_attention(num_heads, in_features)` = the arguments Transformer.__init__ (lines 320-327)
passes with TimesFM 2.5's config (timesfm_2p5_base.py: qk_norm="rms", use_rotary_position_embeddings=True,
fuse_qkv=True; use_per_dim_scale=True).
Truth: correct as what it is, and not the lesson's layer: the formula above (rotate-half RoPE, q/k RMSNorm with their
scales, the per-dimension softplus scale, causal softmax, out) reproduces it to relative 1e-5 (float32 timescales)
with random values in every parameter, and it is causal (_truth.py). The lesson's rotary reference reproduces it only
where the RMSNorm is the identity and the per-dimension scale is at its initial value, which a trained model is not;
at its own initialisation (RMSNorm scales zero) q and k are zero and every row attends uniformly to the past.
"""

# Copyright 2025 Google LLC
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

"""Transformer layers for TimesFM."""

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

TARGET = "timesfm_2p5_attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("qk-rmsnorm-after-rope", "learned-per-dimension-scale", "keyword-only-forward", "tuple-output",
             "no-output-bias", "no-context-length", "decode-cache-object")
FORWARD = "inputs_q, *, decode_cache=None, patch_mask=None"
NOTES = ("MultiHeadAttention(num_heads, in_features, *, use_per_dim_scale=True, use_rotary_position_embeddings=True, "
         "use_bias=False, attention_fn=..., qk_norm='rms', fuse_qkv=False) -> (out, decode_cache).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("TimesFM's learned per-dimension scale (head width, shared by the heads) is a parameter the lesson's "
                    "layer does not have: param-count (+dh, exactly per_dim_scale) and head-invariance (the count "
                    "changes only through it) fail, naming it; at its initial value, with the q/k RMSNorms switched "
                    "off, the rotary reference reproduces the layer, so the other checks pass and no mistake is named")


# ---------------------------------------------------------------------------------------------------- copied
# from timesfm/torch/util.py (lines 17-18, 23-30) and timesfm/torch/normalization.py (lines 21-39)
import dataclasses
import torch


@dataclasses.dataclass(frozen=False)
class DecodeCache:
  """Cache for decoding."""

  next_index: torch.Tensor
  num_masked: torch.Tensor
  key: torch.Tensor
  value: torch.Tensor


class RMSNorm(nn.Module):
  """RMS normalization."""

  def __init__(
      self,
      num_features: int,
      *,
      epsilon: float = 1e-6,
  ):
    super().__init__()
    self.scale = nn.Parameter(torch.zeros(num_features))
    self.num_features = num_features
    self.epsilon = epsilon

  def forward(self, inputs: torch.Tensor) -> torch.Tensor:
    var = torch.mean(torch.square(inputs), dim=-1, keepdim=True)
    normed_inputs = inputs * torch.rsqrt(var + self.epsilon)
    normed_inputs = normed_inputs * self.scale
    return normed_inputs

# ---------------------------------------------------------------------------------------------------- ADDED
class normalization:  # noqa: N801 - `from . import normalization` in the package
  RMSNorm = RMSNorm


class util:  # noqa: N801 - `from . import util` in the package
  DecodeCache = DecodeCache


LayerNorm = nn.LayerNorm
RMSNorm = normalization.RMSNorm
DecodeCache = util.DecodeCache


def make_attn_mask(
  query_length: int,
  num_all_masked_kv: torch.Tensor,
  query_index_offset: torch.Tensor | None = None,
  kv_length: int = 0,
) -> torch.Tensor:
  """Makes attention mask."""
  if kv_length == 0:
    kv_length = query_length

  q_index = torch.arange(query_length, device=num_all_masked_kv.device)[
    None, None, :, None
  ]
  if query_index_offset is not None:
    q_index = q_index + query_index_offset[:, None, None, None]
  kv_index = torch.arange(kv_length, device=num_all_masked_kv.device)[
    None, None, None, :
  ]
  return torch.logical_and(
    q_index >= kv_index,
    kv_index >= num_all_masked_kv[:, None, None, None],
  )


class RotaryPositionalEmbedding(nn.Module):
  """Rotary positional embedding."""

  def __init__(
    self,
    embedding_dims: int,
    min_timescale: float = 1.0,
    max_timescale: float = 10000.0,
  ):
    super().__init__()
    self.embedding_dims = embedding_dims
    self.min_timescale = min_timescale
    self.max_timescale = max_timescale

  def forward(
    self,
    inputs: torch.Tensor,
    position: torch.Tensor | None = None,
  ):
    """Generates a JTensor of sinusoids with different frequencies."""
    if self.embedding_dims != inputs.shape[-1]:
      raise ValueError(
        "The embedding dims of the rotary position embedding"
        "must match the hidden dimension of the inputs."
      )
    half_embedding_dim = self.embedding_dims // 2
    fraction = (
      2
      * torch.arange(0, half_embedding_dim, device=inputs.device)
      / self.embedding_dims
    )
    timescale = (
      self.min_timescale * (self.max_timescale / self.min_timescale) ** fraction
    ).to(inputs.device)
    if position is None:
      seq_length = inputs.shape[1]
      position = torch.arange(seq_length, dtype=torch.float32, device=inputs.device)[
        None, :
      ]

    if len(inputs.shape) == 4:
      position = position[..., None, None]
      timescale = timescale[None, None, None, :]
    elif len(inputs.shape) == 3:
      position = position[..., None]
      timescale = timescale[None, None, :]
    else:
      raise ValueError("Inputs must be of rank 3 or 4.")

    sinusoid_inp = position / timescale
    sin = torch.sin(sinusoid_inp)
    cos = torch.cos(sinusoid_inp)
    first_half, second_half = torch.chunk(inputs, 2, dim=-1)
    first_part = first_half * cos - second_half * sin
    second_part = second_half * cos + first_half * sin
    return torch.cat([first_part, second_part], dim=-1)


def _dot_product_attention(
  query,
  key,
  value,
  mask=None,
):
  """Computes dot-product attention given query, key, and value."""
  attn_weights = torch.einsum("...qhd,...khd->...hqk", query, key)
  if mask is not None:
    attn_weights = torch.where(
      mask, attn_weights, -torch.finfo(attn_weights.dtype).max / 2
    )

  attn_weights = F.softmax(attn_weights, dim=-1)

  return torch.einsum("...hqk,...khd->...qhd", attn_weights, value)


def _torch_dot_product_attention(query, key, value, mask=None):
  """
  Performs the exact same (unscaled) attention as the above function,
  but using the fast and fused F.scaled_dot_product_attention kernel.
  """

  # 1. Permute inputs from (B, L, H, D) to the expected (B, H, L, D)
  query = query.permute(0, 2, 1, 3)
  key = key.permute(0, 2, 1, 3)
  value = value.permute(0, 2, 1, 3)

  # 2. Call the fused attention kernel
  #    - Pass the mask to `attn_mask`.
  #    - Set `scale=1.0` to disable the default 1/sqrt(d_k) scaling.
  output = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=1.0)

  # 3. Permute the output back to the original (B, L, H, D) layout
  output = output.permute(0, 2, 1, 3)

  return output


class PerDimScale(nn.Module):
  """Per-dimension scaling."""

  def __init__(self, num_dims: int):
    super().__init__()
    self.num_dims = num_dims
    self.per_dim_scale = nn.Parameter(torch.zeros(num_dims))

  def forward(self, x: torch.Tensor) -> torch.Tensor:
    scale_factor = (
      1.442695041 / math.sqrt(self.num_dims) * F.softplus(self.per_dim_scale)
    )
    return x * scale_factor


class MultiHeadAttention(nn.Module):
  """Multi-head attention."""

  def __init__(
    self,
    num_heads: int,
    in_features: int,
    *,
    use_per_dim_scale: bool = True,
    use_rotary_position_embeddings: bool = True,
    use_bias: bool = False,
    attention_fn: Callable[..., torch.Tensor] = _torch_dot_product_attention,
    qk_norm: str = "rms",
    fuse_qkv: bool = False,
  ):
    super().__init__()
    self.num_heads = num_heads
    self.in_features = in_features
    self.head_dim = in_features // num_heads
    self.use_bias = use_bias
    self.attention_fn = attention_fn
    self.qk_norm = qk_norm
    self.fuse_qkv = fuse_qkv

    if self.in_features % self.num_heads != 0:
      raise ValueError(
        f"Memory dimension ({self.in_features}) must be divisible by "
        f"'num_heads' heads ({self.num_heads})."
      )

    if self.fuse_qkv:
      self.qkv_proj = nn.Linear(self.in_features, 3 * self.in_features, bias=use_bias)
    else:
      self.query = nn.Linear(self.in_features, self.in_features, bias=use_bias)
      self.key = nn.Linear(self.in_features, self.in_features, bias=use_bias)
      self.value = nn.Linear(self.in_features, self.in_features, bias=use_bias)
    self.out = nn.Linear(self.in_features, self.in_features, bias=use_bias)

    if self.qk_norm == "rms":
      self.query_ln = RMSNorm(self.head_dim)
      self.key_ln = RMSNorm(self.head_dim)
    else:
      self.query_ln = nn.Identity()
      self.key_ln = nn.Identity()

    self.use_rotary_position_embeddings = use_rotary_position_embeddings
    if self.use_rotary_position_embeddings:
      self.rotary_position_embedding = RotaryPositionalEmbedding(
        embedding_dims=self.head_dim,
      )

    self.use_per_dim_scale = use_per_dim_scale
    if use_per_dim_scale:
      self.per_dim_scale = PerDimScale(num_dims=self.head_dim)

  def forward(
    self,
    inputs_q: torch.Tensor,
    *,
    decode_cache: DecodeCache | None = None,
    patch_mask: torch.Tensor | None = None,
  ) -> tuple[torch.Tensor, DecodeCache | None]:
    b, n_patches, _ = inputs_q.shape
    if patch_mask is None:
      patch_mask = torch.zeros(b, n_patches, dtype=torch.bool, device=inputs_q.device)

    if self.fuse_qkv:
      qkv = self.qkv_proj(inputs_q)
      query, key, value = torch.chunk(qkv, 3, dim=-1)
      query = query.view(b, n_patches, self.num_heads, self.head_dim)
      key = key.view(b, n_patches, self.num_heads, self.head_dim)
      value = value.view(b, n_patches, self.num_heads, self.head_dim)
    else:
      query = self.query(inputs_q).view(b, n_patches, self.num_heads, self.head_dim)
      key = self.key(inputs_q).view(b, n_patches, self.num_heads, self.head_dim)
      value = self.value(inputs_q).view(b, n_patches, self.num_heads, self.head_dim)

    if decode_cache is None:
      num_masked = torch.sum(patch_mask.to(torch.int32), dim=-1)
      next_index = torch.zeros_like(num_masked, dtype=torch.int32)
    else:
      num_masked = (
        torch.sum(patch_mask.to(torch.int32), dim=-1) + decode_cache.num_masked
      )
      next_index = decode_cache.next_index.clone()

    if self.use_rotary_position_embeddings:
      position = (
        torch.arange(n_patches, device=inputs_q.device)[None, :]
        + next_index[:, None]
        - num_masked[:, None]
      )
      query = self.rotary_position_embedding(query, position)
      key = self.rotary_position_embedding(key, position)

    query = self.query_ln(query)
    key = self.key_ln(key)

    if self.use_per_dim_scale:
      query = self.per_dim_scale(query)

    if decode_cache is not None:
      _, decode_cache_size, _, _ = decode_cache.value.shape

      start = decode_cache.next_index[0]
      end = start + n_patches

      # Perform a single, vectorized slice assignment for the entire batch.
      # This is vastly more efficient than a Python for-loop.

      decode_cache.key[:, start:end] = key
      decode_cache.value[:, start:end] = value

      key = decode_cache.key
      value = decode_cache.value
      decode_cache.next_index += n_patches
      decode_cache.num_masked = num_masked
      attn_mask = make_attn_mask(
        query_length=n_patches,
        num_all_masked_kv=num_masked,
        query_index_offset=next_index,
        kv_length=decode_cache_size,
      )
    else:
      attn_mask = make_attn_mask(query_length=n_patches, num_all_masked_kv=num_masked)

    x = self.attention_fn(
      query,
      key,
      value,
      mask=attn_mask,
    )

    x = x.reshape(b, n_patches, self.in_features)
    out = self.out(x)
    return out, decode_cache


# ---------------------------------------------------------------------------------------------------- ADDED factory
def timesfm_2p5_attention(num_heads, in_features):
  """The attention of a TimesFM 2.5 transformer layer (Transformer.__init__ with timesfm_2p5_base.py's config)."""
  return MultiHeadAttention(
    num_heads=num_heads,
    in_features=in_features,
    use_per_dim_scale=True,
    use_rotary_position_embeddings=True,
    qk_norm="rms",
    fuse_qkv=True,
  )
