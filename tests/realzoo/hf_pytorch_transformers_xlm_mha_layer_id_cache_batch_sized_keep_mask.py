"""XLM's MultiHeadAttention as pytorch-transformers 1.2 released it (the library that became HF transformers): the
constructor takes the heads FIRST and a config (n_heads, dim, config: output_attentions, attention_dropout);
q_lin / k_lin / v_lin / out_lin with biases; forward(input, mask, kv=None, cache=None, head_mask=None) with a
REQUIRED mask, 1 / True = keep, either (bs, klen) (padding) or (bs, qlen, klen) - reshaped by `.view(bs, 1, qlen,
klen)`, so a causal mask must carry the batch size (get_masks builds it (bs, slen, slen)); the query divided by
sqrt(dim_per_head) before the product, `masked_fill_(mask == 0, -inf)` in place, softmax in float32 (`scores.float()`,
type_as back), functional dropout gated by self.training; a KV CACHE in a dict shared by all layers, keyed by a
class-wide counter `layer_id` (NEW_ID = itertools.count()), with cache['slen'] the tokens already cached; returns a
TUPLE (output,) (+ weights with output_attentions).

Source: https://github.com/huggingface/pytorch-transformers (the wheel's METADATA Home-page; now
huggingface/transformers), file pytorch_transformers/modeling_xlm.py as released in pytorch-transformers 1.2.0 on
PyPI.
Licence: Apache-2.0 (file header: "Copyright 2019-present, Facebook, Inc and the HuggingFace Inc. team."; METADATA
"License: Apache", classifier "License :: OSI Approved :: Apache Software License"; LICENSE in the dist-info).
Copied: verbatim from the PyPI wheel pytorch-transformers==1.2.0 (pip download --no-deps), every copied line compared
by program with the unpacked wheel: modeling_xlm.py lines 1-14 (the licence header), 21 (math), 25 (itertools), 28-30
(torch imports), 232-254 (get_masks: how XLMModel makes the causal mask) and 257-358 (class MultiHeadAttention,
whole).  Left out: lines 33-34 (`from .modeling_utils import ... prune_linear_layer`; prune_heads is never called
here: the stand-in below) and the rest of the file.  ADDED: the stand-in prune_linear_layer = None, the factory
`build` at the end (a config object holding XLMConfig's defaults for the two fields the layer reads:
output_attentions=False, attention_dropout=0.1), this docstring and the entry's constants.
Truth: correct (in _truth.py): build(12, 3) in eval() called as m(x, get_masks(n, lengths=n, causal=True)[1])[0]
(a bool keep-mask (B, n, n)) = mha_forward with q_lin / k_lin / v_lin / out_lin and their biases, and the per-head
loop, at float32 precision (softmax in float32: relative 1e-5, FLOAT32_TOL); no leak; a (1, n, n) mask for a batch
of 2 raises in the view; decoding one token at a time through the cache dict (cache['slen'] advanced by the
caller, as XLMModel does) gives the whole forward's outputs.
"""
# coding=utf-8
# Copyright 2019-present, Facebook, Inc and the HuggingFace Inc. team.
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
import math
import itertools
import torch
from torch import nn
from torch.nn import functional as F
prune_linear_layer = None  # added for the zoo: stands in for lines 33-34's import (prune_heads is not called here)


def get_masks(slen, lengths, causal, padding_mask=None):
    """
    Generate hidden states mask, and optionally an attention mask.
    """
    bs = lengths.size(0)
    if padding_mask is not None:
        mask = padding_mask
    else:
        assert lengths.max().item() <= slen
        alen = torch.arange(slen, dtype=torch.long, device=lengths.device)
        mask = alen < lengths[:, None]

    # attention mask is the same as mask, or triangular inferior attention (causal)
    if causal:
        attn_mask = alen[None, None, :].repeat(bs, slen, 1) <= alen[None, :, None]
    else:
        attn_mask = mask

    # sanity check
    assert mask.size() == (bs, slen)
    assert causal is False or attn_mask.size() == (bs, slen, slen)

    return mask, attn_mask


class MultiHeadAttention(nn.Module):

    NEW_ID = itertools.count()

    def __init__(self, n_heads, dim, config):
        super(MultiHeadAttention, self).__init__()
        self.layer_id = next(MultiHeadAttention.NEW_ID)
        self.output_attentions = config.output_attentions
        self.dim = dim
        self.n_heads = n_heads
        self.dropout = config.attention_dropout
        assert self.dim % self.n_heads == 0

        self.q_lin = nn.Linear(dim, dim)
        self.k_lin = nn.Linear(dim, dim)
        self.v_lin = nn.Linear(dim, dim)
        self.out_lin = nn.Linear(dim, dim)
        self.pruned_heads = set()

    def prune_heads(self, heads):
        attention_head_size = self.dim // self.n_heads
        if len(heads) == 0:
            return
        mask = torch.ones(self.n_heads, attention_head_size)
        heads = set(heads) - self.pruned_heads
        for head in heads:
            head -= sum(1 if h < head else 0 for h in self.pruned_heads)
            mask[head] = 0
        mask = mask.view(-1).contiguous().eq(1)
        index = torch.arange(len(mask))[mask].long()
        # Prune linear layers
        self.q_lin = prune_linear_layer(self.q_lin, index)
        self.k_lin = prune_linear_layer(self.k_lin, index)
        self.v_lin = prune_linear_layer(self.v_lin, index)
        self.out_lin = prune_linear_layer(self.out_lin, index, dim=1)
        # Update hyper params
        self.n_heads = self.n_heads - len(heads)
        self.dim = attention_head_size * self.n_heads
        self.pruned_heads = self.pruned_heads.union(heads)

    def forward(self, input, mask, kv=None, cache=None, head_mask=None):
        """
        Self-attention (if kv is None) or attention over source sentence (provided by kv).
        """
        # Input is (bs, qlen, dim)
        # Mask is (bs, klen) (non-causal) or (bs, klen, klen)
        bs, qlen, dim = input.size()
        if kv is None:
            klen = qlen if cache is None else cache['slen'] + qlen
        else:
            klen = kv.size(1)
        # assert dim == self.dim, 'Dimensions do not match: %s input vs %s configured' % (dim, self.dim)
        n_heads = self.n_heads
        dim_per_head = self.dim // n_heads
        mask_reshape = (bs, 1, qlen, klen) if mask.dim() == 3 else (bs, 1, 1, klen)

        def shape(x):
            """  projection """
            return x.view(bs, -1, self.n_heads, dim_per_head).transpose(1, 2)

        def unshape(x):
            """  compute context """
            return x.transpose(1, 2).contiguous().view(bs, -1, self.n_heads * dim_per_head)

        q = shape(self.q_lin(input))                                          # (bs, n_heads, qlen, dim_per_head)
        if kv is None:
            k = shape(self.k_lin(input))                                      # (bs, n_heads, qlen, dim_per_head)
            v = shape(self.v_lin(input))                                      # (bs, n_heads, qlen, dim_per_head)
        elif cache is None or self.layer_id not in cache:
            k = v = kv
            k = shape(self.k_lin(k))                                          # (bs, n_heads, qlen, dim_per_head)
            v = shape(self.v_lin(v))                                          # (bs, n_heads, qlen, dim_per_head)

        if cache is not None:
            if self.layer_id in cache:
                if kv is None:
                    k_, v_ = cache[self.layer_id]
                    k = torch.cat([k_, k], dim=2)                             # (bs, n_heads, klen, dim_per_head)
                    v = torch.cat([v_, v], dim=2)                             # (bs, n_heads, klen, dim_per_head)
                else:
                    k, v = cache[self.layer_id]
            cache[self.layer_id] = (k, v)

        q = q / math.sqrt(dim_per_head)                                       # (bs, n_heads, qlen, dim_per_head)
        scores = torch.matmul(q, k.transpose(2, 3))                           # (bs, n_heads, qlen, klen)
        mask = (mask == 0).view(mask_reshape).expand_as(scores)               # (bs, n_heads, qlen, klen)
        scores.masked_fill_(mask, -float('inf'))                              # (bs, n_heads, qlen, klen)

        weights = F.softmax(scores.float(), dim=-1).type_as(scores)           # (bs, n_heads, qlen, klen)
        weights = F.dropout(weights, p=self.dropout, training=self.training)  # (bs, n_heads, qlen, klen)

        # Mask heads if we want to
        if head_mask is not None:
            weights = weights * head_mask

        context = torch.matmul(weights, v)                                    # (bs, n_heads, qlen, dim_per_head)
        context = unshape(context)                                            # (bs, qlen, dim)

        outputs = (self.out_lin(context),)
        if self.output_attentions:
            outputs = outputs + (weights,)
        return outputs


class _XLMAttentionConfig:  # added for the zoo: XLMConfig's defaults for the two fields the layer reads
    output_attentions = False
    attention_dropout = 0.1


def build(d_model, num_heads, context_length=None):  # added for the zoo
    return MultiHeadAttention(num_heads, d_model, _XLMAttentionConfig())


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("heads-first-constructor", "config-object", "required-keep-mask-batch-sized", "inf-fill-in-place",
             "float32-softmax", "layer-id-cache-dict", "tuple-output")
FORWARD = "input, mask, kv=None, cache=None, head_mask=None"
NOTES = ("build(d_model, num_heads) = MultiHeadAttention(num_heads, d_model, config); forward(input, mask (bs, n, n), "
         "1 = keep) -> (output (B, n, d),).")
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the lesson's layer given a causal keep-mask of the batch's size (B, n, n), -inf in place, float32 "
                    "softmax within the reference tolerance, divisibility asserted")
