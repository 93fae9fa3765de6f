"""JoeyNMT 2.0.0's MultiHeadedAttention ("modified from OpenNMT-py"): the number of heads FIRST in the constructor,
MultiHeadedAttention(num_heads, size, dropout=0.1) with an assert on divisibility; k_layer / v_layer / q_layer /
output_layer Linears with biases, declared keys first; forward(k, v, q, mask=None, return_weights=None) takes its
inputs KEYS FIRST; q divided by sqrt(head_size) before the product; the mask bool True = keep, (B, n_q, n_k) (or
(B, 1, n_k) for padding), unsqueezed for the heads and filled where False with -inf (not in place); an nn.Softmax(dim=-1)
module; returns a TUPLE (output, None), or (output, the weights averaged over the heads) with return_weights=True.

Source: https://github.com/joeynmt/joeynmt (the wheel's METADATA Home-page), file joeynmt/transformer_layers.py as
released in joeynmt 2.0.0 on PyPI.  The decoder builds the self-attention mask in joeynmt/decoders.py
(TransformerDecoder.forward: `trg_mask = trg_mask & subsequent_mask(trg_embed.size(1)).type_as(trg_mask)`, the padding
mask (B, 1, n) and joeynmt/helpers.py's subsequent_mask, tril(ones(n, n)).unsqueeze(0), so (B, n, n) True = keep).
Licence: Apache-2.0 (LICENSE in the wheel's dist-info, "Apache License Version 2.0", its appendix "Copyright [2020]
[Julia Kreutzer & Jasmijn Bastings]"; METADATA "License: Apache License").
Copied: verbatim from the PyPI wheel joeynmt==2.0.0 (pip download --no-deps), every copied line compared by program
with the unpacked wheel: lines 5-11 (imports) and 12-107 (class MultiHeadedAttention, whole).  Left out: lines 1-4
(coding line, module docstring) and 108-end (the feed-forward, positional encoding and the encoder/decoder layers).
ADDED: this docstring and the entry's constants.
Truth: correct given its mask (in _truth.py): MultiHeadedAttention(3, 12) in eval() called keys first as m(x, x, x,
mask=tril(ones(n, n)) (1, n, n))[0] = mha_forward (q_layer, k_layer, v_layer, output_layer with their biases) and the
per-head loop exactly, no leak; the averaged weights with return_weights=True are the lesson's weights' mean over the
heads; without the mask the future moves the past.
"""
import math
from typing import Optional

import torch
from torch import Tensor, nn


class MultiHeadedAttention(nn.Module):
    """
    Multi-Head Attention module from "Attention is All You Need"

    Implementation modified from OpenNMT-py.
    https://github.com/OpenNMT/OpenNMT-py
    """

    def __init__(self, num_heads: int, size: int, dropout: float = 0.1) -> None:
        """
        Create a multi-headed attention layer.

        :param num_heads: the number of heads
        :param size: hidden size (must be divisible by num_heads)
        :param dropout: probability of dropping a unit
        """
        super().__init__()

        assert size % num_heads == 0

        self.head_size = head_size = size // num_heads
        self.model_size = size
        self.num_heads = num_heads

        self.k_layer = nn.Linear(size, num_heads * head_size)
        self.v_layer = nn.Linear(size, num_heads * head_size)
        self.q_layer = nn.Linear(size, num_heads * head_size)

        self.output_layer = nn.Linear(size, size)
        self.softmax = nn.Softmax(dim=-1)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        k: Tensor,
        v: Tensor,
        q: Tensor,
        mask: Optional[Tensor] = None,
        return_weights: Optional[bool] = None,
    ):
        """
        Computes multi-headed attention.

        :param k: keys   [batch_size, seq_len, hidden_size]
        :param v: values [batch_size, seq_len, hidden_size]
        :param q: query  [batch_size, seq_len, hidden_size]
        :param mask: optional mask [batch_size, 1, seq_len]
        :param return_weights: whether to return the attention weights,
            averaged over heads.
        :return:
            - output  [batch_size, query_len, hidden_size]
            - attention_weights  [batch_size, query_len, key_len]
        """
        batch_size = k.size(0)
        key_len = k.size(1)
        query_len = q.size(1)

        # project the queries (q), keys (k), and values (v)
        k = self.k_layer(k)
        v = self.v_layer(v)
        q = self.q_layer(q)

        # reshape q, k, v for our computation to [batch_size, num_heads, ..]
        k = k.view(batch_size, -1, self.num_heads, self.head_size).transpose(1, 2)
        v = v.view(batch_size, -1, self.num_heads, self.head_size).transpose(1, 2)
        q = q.view(batch_size, -1, self.num_heads, self.head_size).transpose(1, 2)

        # compute scores
        q = q / math.sqrt(self.head_size)

        # [batch_size, num_heads, query_len, key_len]
        scores = torch.matmul(q, k.transpose(2, 3))

        # apply the mask (if we have one)
        # we add a dimension for the heads to it below: [batch_size, 1, 1, key_len]
        if mask is not None:
            scores = scores.masked_fill(~mask.unsqueeze(1), float("-inf"))

        # apply attention dropout and compute context vectors.
        attention_weights = self.softmax(scores)
        attention_probs = self.dropout(attention_weights)

        # get context vector (select values with attention) and reshape
        # back to [batch_size, query_len, hidden_size]
        context = torch.matmul(attention_probs, v)
        context = context.transpose(1, 2).contiguous().view(
            batch_size, -1, self.num_heads * self.head_size)

        output = self.output_layer(context)

        if return_weights:
            # average attention weights over heads: [batch_size, query_len, key_len]
            attention_output_weights = attention_weights.view(
                batch_size, self.num_heads, query_len, key_len)
            return output, attention_output_weights.sum(dim=1) / self.num_heads
        return output, None


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "MultiHeadedAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("heads-first-constructor", "keys-first-forward", "keys-declared-first", "mask-argument-true-is-keep",
             "softmax-module", "tuple-output")
FORWARD = "k, v, q, mask=None, return_weights=None"
NOTES = ("MultiHeadedAttention(num_heads, size, dropout=0.1); causal only through mask (B or 1, n, n) bool True = "
         "keep; returns (output, None) or (output, head-averaged weights).")
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the lesson's layer called keys first with its (1, n, n) True-is-keep mask (x for k, v and q "
                    "alike), biases everywhere, an assert on divisibility: every check and rule passes")
