"""dreamgonfly's transformer-pytorch MultiHeadAttention: query_projection / key_projection / value_projection /
final_projection without biases, an injected ScaledDotProductAttention(temperature=np.sqrt(d_head)) module that
fills the mask BEFORE dividing by the temperature and softmaxes with an nn.Softmax(dim=3) module; a REQUIRED
`mode` (an AttentionMode enum: SELF or MEMORY) and a forward with six positional parameters and no defaults,
forward(query, key, value, mask, state, cache) -> (output, state): `state` an AttentionState dict, `cache` a bool
(with cache=False the state is neither read nor written, so None will do); the mask is a (B, n, n) bool tensor with
True = MASKED (the decoder's `input_length_mask | input_subsequent_mask`), unsqueezed at dim 1 inside; an (n, n)
mask becomes (n, 1, n), which raises against (B, H, n, n) scores unless n equals the number of heads - and then it
silently masks head h with row h for every query.

Source: https://github.com/dreamgonfly/transformer-pytorch (transformer-pytorch 0.0.1 on PyPI, the distribution's
Home-page), files transformer/model/multi_head_attention.py, transformer/model/scaled_dot_product_attention.py and
transformer/model/state.py as released in transformer-pytorch 0.0.1.
Licence: MIT (the wheel's METADATA "License: MIT" and LICENSE in its dist-info, "Copyright (c) 2018 Yongrae Jo").
Copied: verbatim from the PyPI wheel transformer-pytorch==0.0.1 (pip download --no-deps): lines 1-6 of
transformer/model/multi_head_attention.py (imports) and lines 12-102 (MultiHeadAttention); lines 8-33 of
transformer/model/scaled_dot_product_attention.py (ScaledDotProductAttention); lines 1-3 and 9-82 of
transformer/model/state.py (AttentionMode, AttentionCache, AttentionState).  Left out: the package imports.
ADDED: this entry's constants and the factory `decoder_self_attention(d_model, n_heads, dropout)`, the module as
TransformerDecoderLayer builds it (transformer/model/decoder_layer.py lines 15-17: MultiHeadAttentionSublayer(d_model,
n_heads, dropout, AttentionMode.SELF), whose attention is MultiHeadAttention(d_model, n_heads, dropout, mode)).
Truth: correct given its mask: with the (B, n, n) bool mask True above the diagonal, state=None and cache=False,
in eval(), mha_forward with query_projection, key_projection, value_projection, final_projection and no biases,
exactly; no leak.
"""
from __future__ import annotations
from enum import Enum
from typing import List
from typing import Optional, Tuple

import torch
from torch import Tensor
from torch import nn
import numpy as np

TARGET = "decoder_self_attention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("no-biases", "required-mode-enum", "six-positional-forward-args", "state-and-cache-args",
             "tuple-output", "mask-true-masked-b-n-n", "injected-score-module")
FORWARD = "query, key, value, mask, state, cache"
NOTES = ("MultiHeadAttention(d_model, n_heads, dropout, mode); forward(query, key, value, mask, state, cache) -> "
         "(output (B, n, d_model), state); mask (B, n, n) bool, True = masked.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("called as forward(x, x, x, state=None, cache=False, mask=(1, n, n) True = masked) it is the lesson's "
                    "layer without biases (out-proj-bias fails, a rule); its cache lives in an AttentionState object "
                    "mha-check cannot make, so kv-cache cannot tell: our limit, no failure")


class AttentionMode(Enum):
    SELF = "self"
    MEMORY = "memory"


class AttentionCache(dict):
    @property
    def key_projected(self) -> Tensor:
        return self.get("key_projected")

    @key_projected.setter
    def key_projected(self, key_projected: Tensor) -> None:
        self["key_projected"] = key_projected

    @property
    def value_projected(self) -> Tensor:
        return self.get("value_projected")

    @value_projected.setter
    def value_projected(self, value_projected: Tensor) -> None:
        self["value_projected"] = value_projected

    def select_sample(self, sample_index: int) -> AttentionCache:
        cache = AttentionCache()
        if self.key_projected is not None:
            cache.key_projected = self.key_projected[sample_index : sample_index + 1]
        if self.value_projected is not None:
            cache.value_projected = self.value_projected[sample_index : sample_index + 1]
        return cache

    @classmethod
    def merge(cls, caches: List[AttentionCache]) -> AttentionCache:
        cache = AttentionCache()
        if caches[0].key_projected is not None:
            cache.key_projected = torch.cat([cache.key_projected for cache in caches])
        if caches[0].value_projected is not None:
            cache.value_projected = torch.cat([cache.value_projected for cache in caches])
        return cache


class AttentionState(dict):
    @property
    def attention(self) -> Tensor:
        return self.get("attention")

    @attention.setter
    def attention(self, attention: Tensor) -> None:
        self["attention"] = attention

    @property
    def cache(self) -> AttentionCache:
        if "cache" not in self:
            self["cache"] = AttentionCache()
        return self["cache"]

    @cache.setter
    def cache(self, new_cache: AttentionCache):
        self["cache"] = new_cache

    def select_sample(self, sample_index: int) -> AttentionState:
        state = AttentionState()
        if self.attention is not None:
            state.attention = self.attention[sample_index : sample_index + 1]
        state.cache = self.cache.select_sample(sample_index)
        return state

    @classmethod
    def merge(cls, states: List[AttentionState]) -> AttentionState:
        state = AttentionState()
        if states[0].attention is not None:
            state.attention = torch.cat([state.attention for state in states])
        if states[0].cache is not None:
            state.cache = AttentionCache.merge([state.cache for state in states])
        return state

class ScaledDotProductAttention(nn.Module):
    temperature: float

    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature
        self.softmax = nn.Softmax(dim=3)

    def forward(self, query_heads: Tensor, key_heads: Tensor, mask: Optional[Tensor]) -> Tensor:
        """
        Args:
             query_heads: (batch_size, n_heads, query_len, d_head)
             key_heads: (batch_size, n_heads, key_len, d_head)
             mask:
        """
        key_heads_transposed = key_heads.transpose(2, 3)
        scores = torch.matmul(query_heads, key_heads_transposed)
        # scores: (batch_size, n_heads, query_len, key_len)

        if mask is not None:
            scores = scores.masked_fill(mask, float("-inf"))

        tempered_scores = scores / self.temperature

        attention = self.softmax(tempered_scores)
        return attention

class MultiHeadAttention(nn.Module):
    d_head: int
    n_heads: int
    mode: AttentionMode

    def __init__(self, d_model: int, n_heads: int, dropout: float, mode: Optional[AttentionMode]):
        super(MultiHeadAttention, self).__init__()

        assert d_model % n_heads == 0

        self.d_head = d_model // n_heads
        self.n_heads = n_heads
        self.query_projection = nn.Linear(d_model, n_heads * self.d_head, bias=False)
        self.key_projection = nn.Linear(d_model, n_heads * self.d_head, bias=False)
        self.value_projection = nn.Linear(d_model, n_heads * self.d_head, bias=False)
        self.final_projection = nn.Linear(n_heads * self.d_head, d_model, bias=False)
        self.attention = ScaledDotProductAttention(temperature=np.sqrt(self.d_head))
        self.attention_dropout = nn.Dropout(dropout)

        self.mode = mode

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        mask: Optional[Tensor],
        state: AttentionState,
        cache: bool,
    ) -> Tuple[Tensor, AttentionState]:
        """

        Args:
            query: (batch_size, query_length, d_model)
            key: (batch_size, key_length, d_model)
            value: (batch_size, value_length, d_model)
            mask: (query_length, key_length)
            cache: No cache if None
        """
        batch_size, query_len, d_model = query.size()
        n_heads = self.n_heads
        d_head = self.d_head

        query_projected = self.query_projection(query)
        if not cache or not state.cache:
            key_projected = self.key_projection(key)
            value_projected = self.value_projection(value)
        else:
            if self.mode == AttentionMode.SELF:
                key_projected = self.key_projection(key)
                value_projected = self.value_projection(value)
                key_projected = torch.cat([state.cache.key_projected, key_projected], dim=1)
                value_projected = torch.cat([state.cache.value_projected, value_projected], dim=1)
            elif self.mode == AttentionMode.MEMORY:
                key_projected = state.cache.key_projected
                value_projected = state.cache.value_projected
            else:
                raise NotImplementedError

        if cache:
            state.cache.key_projected = key_projected
            state.cache.value_projected = value_projected

        batch_size, key_len, d_model = key_projected.size()
        batch_size, value_len, d_model = value_projected.size()

        query_heads = query_projected.view(batch_size, query_len, n_heads, d_head).transpose(1, 2)
        # query_heads: (batch_size, n_heads, query_len, d_head)
        key_heads = key_projected.view(batch_size, key_len, n_heads, d_head).transpose(1, 2)
        # key_heads: (batch_size, n_heads, key_len, d_head)
        value_heads = value_projected.view(batch_size, value_len, n_heads, d_head).transpose(1, 2)
        # value_heads: (batch_size, n_heads, value_len, d_head)

        if mask is not None:
            mask = mask.unsqueeze(1)
        attention = self.attention(query_heads, key_heads, mask)
        # attention: (batch_size, n_heads, query_len, key_len)
        attention_dropped = self.attention_dropout(attention)

        context_heads = torch.matmul(attention_dropped, value_heads)
        # context_heads: (batch_size, n_heads, query_len, d_head)
        context_sequence = context_heads.transpose(1, 2).contiguous()
        # (batch_size, query_len, n_heads, d_head)
        context = context_sequence.view(batch_size, query_len, d_model)
        # (batch_size, query_len, d_model)
        final_output = self.final_projection(context)

        if cache:
            state.attention = attention.detach().cpu()

        return final_output, state


# ---------------------------------------------------------------------------------------------------- ADDED factory
def decoder_self_attention(d_model, n_heads, dropout):
    """The decoder self-attention as TransformerDecoderLayer builds it (decoder_layer.py lines 15-17)."""
    return MultiHeadAttention(d_model, n_heads, dropout, AttentionMode.SELF)
