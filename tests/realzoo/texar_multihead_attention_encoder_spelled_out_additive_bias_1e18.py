"""texar-pytorch's MultiheadAttentionEncoder (the Transformer decoder's self-attention in Texar, ported from
TensorFlow): SPELLED-OUT projections Q_dense / K_dense / V_dense / O_dense (nn.Linear, no biases by default:
use_bias=False), every size from an hparams dict merged over default_hparams() (num_heads, num_units, output_dim,
dropout_rate 0.1); forward(queries, memory, memory_attention_bias, cache=None) with NO defaults - memory=None
means self-attention, and causality comes only from memory_attention_bias, an ADDITIVE float bias (the decoder's
attention_bias_lower_triangle(n): -1e18 * (1 - band), (1, 1, n, n), float32 from numpy); the divisibility of
num_units by num_heads is checked in FORWARD (ValueError), not in the constructor; Q_ *= depth ** -0.5 in place,
torch.softmax, functional dropout gated by self.training, split/combine by reshape + permute.  A dict cache for
step-by-step decoding (keys / values concatenated, or a list stacked).

Source: https://github.com/asyml/texar-pytorch (the wheel's METADATA Home-page), files
texar/torch/modules/encoders/multihead_attention.py and texar/torch/utils/transformer_attentions.py as released in
texar-pytorch 0.1.4 on PyPI. Licence: Apache-2.0 (file headers: "Copyright 2019 The Texar Authors. All Rights
Reserved."; METADATA "License: Apache License Version 2.0"; LICENSE in the wheel's dist-info). Copied: verbatim from
the PyPI wheel texar-pytorch==0.1.4 (pip download --no-deps), every copied line compared by program with the unpacked
wheel: multihead_attention.py lines 1-22 (header, docstring, imports) and 29-260 (__all__, LayerCache, Cache, class
MultiheadAttentionEncoder whole); transformer_attentions.py lines 18 and 20 (typing, numpy) and 30-106
(attention_bias_lower_triangle, attention_bias_local, attention_bias_ignore_padding, _ones_matrix_band_part). Left
out: lines 23-27 (mypy_extensions' TypedDict, texar's layers, EncoderBase and MaybeList: the stand-ins below). ADDED:
the stand-ins (typing's TypedDict; MaybeList = Union[T, List[T]]; EncoderBase = an nn.Module holding default_hparams()
updated by the given dict as attributes, what texar's HParams gives the layer; layers = None, read only with an
initializer), the factory `build` at the end, this docstring and the entry's constants. Truth: correct (in _truth.py):
build(12, 3) in eval() called as m(x, None, attention_bias_lower_triangle(n)) = mha_forward with Q_dense / K_dense /
V_dense / O_dense (no biases) and the per-head loop, exactly; no leak; without the bias (None) the future moves the
past; build(8, 3) constructs and its forward raises ValueError.
"""
# Copyright 2019 The Texar Authors. All Rights Reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""
Transformer encoders with multi-head self attention.
"""

from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import nn
# --- added for the zoo: stand-ins for lines 23-27's imports ---
import typing
from typing import TypedDict, TypeVar, Union

_T = TypeVar('_T')
MaybeList = Union[_T, typing.List[_T]]
layers = None  # texar.torch.core.layers: read only when hparams name an initializer


class EncoderBase(nn.Module):  # texar's EncoderBase / ModuleBase: self._hparams = default_hparams() updated by hparams
    def __init__(self, hparams=None):
        super().__init__()
        self._hparams = type('HParams', (), {**self.default_hparams(), **(hparams or {})})()
# --- end of the stand-ins ---
from typing import Optional, Tuple
import numpy as np


def attention_bias_lower_triangle(length: int,
                                  bias_value: float = -1e18) -> torch.Tensor:
    r"""Create an bias tensor to be added to attention logits.
    Allows a query to attend to all positions up to and including its own.

    Args:
        length: a scalar.
        bias_value: value to fill the bias tensor with.

    Returns:
        a ``Tensor`` with shape [1, 1, length, length].
    """
    return attention_bias_local(length, -1, 0, bias_value)


def attention_bias_local(length: int, max_backward: int, max_forward: int,
                         bias_value: float = -1e18) -> torch.Tensor:
    r"""Create an bias tensor to be added to attention logits.
    A position may attend to positions at most max_distance from it,
    forward and backwards.

    This does not actually save any computation.

    Args:
        length: int
        max_backward: int, maximum distance backward to attend. Negative
            values indicate unlimited.
        max_forward: int, maximum distance forward to attend. Negative
            values indicate unlimited.
        bias_value: value to fill the bias tensor with.

    Returns:
        a ``Tensor`` with shape [1, 1, length, length].
        [batch_size, num_heads, query_len, query_len]
    """
    band = _ones_matrix_band_part(
        length,
        length,
        max_backward,
        max_forward,
        out_shape=(1, 1, length, length))
    return bias_value * (1.0 - band)


def attention_bias_ignore_padding(memory_padding: torch.Tensor,
                                  bias_value: float = -1e18) -> torch.Tensor:
    r"""Create an bias tensor to be added to attention logits.

    Args:
        memory_padding: a float ``Tensor`` with shape [batch, memory_length].
        bias_value: value to fill the bias tensor with.

    Returns:
        a ``Tensor`` with shape [batch, 1, 1, memory_length].
        each dim corresponding to batch_size, num_heads, queries_len,
        memory_length
    """
    ret = memory_padding * bias_value
    return ret.view(ret.size(0), 1, 1, ret.size(-1))


def _ones_matrix_band_part(rows: int, cols: int, num_lower: int, num_upper: int,
                           out_shape: Optional[Tuple[int, ...]] = None) \
        -> torch.Tensor:
    r"""Matrix band part of ones.
    """
    if num_lower < 0:
        num_lower = rows - 1
    if num_upper < 0:
        num_upper = cols - 1
    lower_mask = np.tri(cols, rows, num_lower).T
    upper_mask = np.tri(rows, cols, num_upper)
    band = np.ones((rows, cols)) * lower_mask * upper_mask
    if out_shape:
        band = band.reshape(out_shape)
    band = torch.as_tensor(band, dtype=torch.float32)
    return band


__all__ = [
    'MultiheadAttentionEncoder',
    'Cache',
]


class LayerCache(TypedDict):
    r"""Cache (state) for a single self-attention layer in
    :class:`MultiheadAttentionEncoder`.
    """
    keys: MaybeList[torch.Tensor]
    values: MaybeList[torch.Tensor]


class Cache(TypedDict):
    r"""Cache (state) for the entire :class:`MultiheadAttentionEncoder`.
    """
    memory: Optional[torch.Tensor]
    memory_attention_bias: Optional[torch.Tensor]
    layers: List[LayerCache]


class MultiheadAttentionEncoder(EncoderBase):
    r"""Multi-head Attention Encoder.

    Args:
        hparams (dict or HParams, optional): Hyperparameters. Missing
            hyperparameters will be set to default values. See
            :meth:`default_hparams` for the hyperparameter structure and
            default values.

    .. document private functions
    """

    def __init__(self, input_size: int, hparams=None):
        super().__init__(hparams=hparams)
        use_bias = self._hparams.use_bias

        self.Q_dense = nn.Linear(input_size, self._hparams.num_units,
                                 bias=use_bias)
        self.K_dense = nn.Linear(input_size, self._hparams.num_units,
                                 bias=use_bias)
        self.V_dense = nn.Linear(input_size, self._hparams.num_units,
                                 bias=use_bias)
        self.O_dense = nn.Linear(self._hparams.num_units,
                                 self._hparams.output_dim, bias=use_bias)

        if self._hparams.initializer:
            # TODO(haoransh): we may define kernel_initializer and bias
            #  initializer seperately
            initialize = layers.get_initializer(self._hparams.initializer)
            assert initialize is not None
            for name, param in self.named_parameters():
                if name.split('.')[-1] == 'weight':
                    print('name:{}'.format(name))
                    initialize(param)

    @staticmethod
    def default_hparams():
        r"""Returns a dictionary of hyperparameters with default values.

        .. code-block:: python

            {
                "initializer": None,
                'num_heads': 8,
                'output_dim': 512,
                'num_units': 512,
                'dropout_rate': 0.1,
                'use_bias': False,
                "name": "multihead_attention"
            }

        Here:

        `"initializer"`: dict, optional
            Hyperparameters of the default initializer that initializes
            variables created in this module.
            See :func:`~texar.torch.core.get_initializer` for details.

        `"num_heads"`: int
            Number of heads for attention calculation.

        `"output_dim"`: int
            Output dimension of the returned tensor.

        `"num_units"`: int
            Hidden dimension of the unsplit attention space.
            Should be divisible by `"num_heads"`.

        `"dropout_rate"`: float
            Dropout rate in the attention.

        `"use_bias"`: bool
            Use bias when projecting the key, value and query.

        `"name"`: str
            Name of the module.
        """
        return {
            'initializer': None,
            'num_heads': 8,
            'output_dim': 512,
            'num_units': 512,
            'dropout_rate': 0.1,
            'use_bias': False,
            'name': 'multihead_attention',
        }

    def forward(self,  # type: ignore
                queries: torch.Tensor,
                memory: torch.Tensor,
                memory_attention_bias: torch.Tensor,
                cache: Optional[LayerCache] = None) \
            -> torch.Tensor:
        r"""Encodes the inputs.

        Args:
            queries: A 3D tensor with shape of
                ``[batch, length_query, depth_query]``.
            memory: A 3D tensor with shape of
                ``[batch, length_key, depth_key]``.
            memory_attention_bias: A 3D tensor with shape of
                ``[batch, length_key, num_units]``.
            cache: Memory cache only when inferring the sentence from scratch.

        Returns:
            A tensor of shape ``[batch_size, max_time, dim]`` containing the
            encoded vectors.
        """

        num_heads = self._hparams.num_heads
        num_units = self._hparams.num_units
        if num_units % num_heads != 0:
            raise ValueError(
                f"Value depth ({num_units}) must be divisible by "
                f"the number of attention heads ({num_heads}).")

        def _update_and_return(layer: nn.Module, key: str):
            if memory is None:
                # Self Attention
                out = layer(queries)

                if cache is not None:
                    # decoder self attention when dynamic decoding
                    res: MaybeList[torch.Tensor] = cache[key]
                    if isinstance(res, list):
                        # inference-like decoding
                        res.append(out.squeeze(1))
                        out = torch.stack(res, dim=1)
                    else:
                        # normal decoding
                        res = torch.cat([res, out], dim=1)
                        out = res
                    cache[key] = res

            else:
                # encoder decoder attention
                if cache is not None:
                    res: MaybeList[torch.Tensor] = cache[key]  # type: ignore
                    if isinstance(res, list):
                        # inference-like decoding
                        if len(res) == 0:
                            out = layer(memory)
                        else:
                            out = torch.stack(res, dim=1)
                    else:
                        # normal decoding
                        if res.size(1) == 0:
                            out = layer(memory)
                        else:
                            out = res
                else:
                    out = layer(memory)

            return out

        Q = self.Q_dense(queries)
        K = _update_and_return(self.K_dense, 'keys')
        V = _update_and_return(self.V_dense, 'values')

        Q_ = self._split_heads(Q)
        K_ = self._split_heads(K)
        V_ = self._split_heads(V)
        # [batch_size, num_heads, seq_length, memory_depth]
        key_depth_per_head = num_units // num_heads
        Q_ *= key_depth_per_head ** -0.5

        logits = torch.matmul(Q_, K_.transpose(-2, -1))
        if memory_attention_bias is not None:
            memory_attention_bias = memory_attention_bias.to(
                device=logits.device)
            logits += memory_attention_bias
        weights = torch.softmax(logits, dim=-1)
        weights = F.dropout(weights, self._hparams.dropout_rate, self.training)
        outputs = torch.matmul(weights, V_)

        outputs = self._combine_heads(outputs)
        outputs = self.O_dense(outputs)
        # (batch_size, length_query, output_dim)

        return outputs

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        r"""Split channels (dimension 2) into multiple heads,
        becomes dimension 1). Must ensure ``x.shape[-1]`` can be
        divided by num_heads.
        """
        depth = x.size(-1)
        split_x = torch.reshape(x, (
            x.size(0), x.size(1),
            self._hparams.num_heads, depth // self._hparams.num_heads))
        return split_x.permute((0, 2, 1, 3))

    def _combine_heads(self, x: torch.Tensor) -> torch.Tensor:
        r"""

        Args:
            x: A Tensor of shape ``[batch, num_heads, seq_len, dim]``
        Returns:
            A Tensor of shape ``[batch, seq_len, num_heads * dim]``
        """
        t = x.permute((0, 2, 1, 3))  # [batch, seq_len, num_heads, dim]
        num_heads, dim = t.size()[-2:]
        assert num_heads == self._hparams.num_heads
        return torch.reshape(t, (t.size(0), t.size(1), num_heads * dim))

    @property
    def output_size(self):
        r"""The feature size of :meth:`forward` output.
        """
        return self._hparams.output_dim


def build(d_model, num_heads, context_length=None):  # added for the zoo: the decoder's self-attention sizes
    return MultiheadAttentionEncoder(d_model, {"num_heads": num_heads, "num_units": d_model, "output_dim": d_model})


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("spelled-out-dense-names", "hparams-dict", "required-additive-bias-arg", "bias-1e18",
             "divisibility-checked-in-forward", "no-biases")
FORWARD = "queries, memory, memory_attention_bias, cache=None"
NOTES = ("build(d_model, num_heads) = MultiheadAttentionEncoder(d_model, {num_heads, num_units=d, output_dim=d}); "
         "forward(x, None, attention_bias_lower_triangle(n)) -> (B, n, d).")
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = 'forward needs memory, memory_attention_bias (no defaults): what they hold is not said by their names'
