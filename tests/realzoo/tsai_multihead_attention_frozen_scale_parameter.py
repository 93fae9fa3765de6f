"""tsai's MultiheadAttention (tsai.models.layers, the attention of its PatchTST/TSiT models): a fastai `Module`
(a metaclass calls nn.Module.__init__ before the subclass's __init__, which never calls super().__init__()),
W_Q/W_K/W_V Linear(d_model, d_k * n_heads, bias=qkv_bias=True), the keys PRE-TRANSPOSED by .permute(0, 2, 3, 1) to
(bs, H, d_k, len), an inner ScaledDotProductAttention whose scale head_dim ** -0.5 is an nn.Parameter kept FROZEN
(requires_grad=lsa=False: a registered parameter that is a constant, one more element in parameters()), an optional
attn_mask ARGUMENT (bool: True = masked, filled with -np.inf; float: added) and key_padding_mask, output projection
to_out = Sequential(Linear(H * d_v, d_model), Dropout); returns (output, attn_weights). d_k and d_v default to
d_model // n_heads with no divisibility check.

Source: https://github.com/timeseriesAI/tsai (the PyPI project's repository), file tsai/models/layers.py as released
in tsai 1.0.1 on PyPI; the base class from https://github.com/fastai/fastai (fastai/torch_core.py, fastai 2.8.12) and
https://github.com/AnswerDotAI/fastcore (fastcore/meta.py and fastcore/basics.py, fastcore 2.2.41).
Licence: Apache-2.0 (tsai's LICENSE in its wheel's dist-info; the LICENSE files of fastcore and fastai, whose
three helpers are copied too, are Apache-2.0 as well; none carries a copyright line).
Copied: verbatim from the PyPI wheels tsai==1.0.1, fastai==2.8.12 and fastcore==2.2.41 (pip download --no-deps):
tsai/models/layers.py lines 1242-1350 (the classes ScaledDotProductAttention and MultiheadAttention); fastcore's
_rm_self, FixSigMeta and PrePostInitMeta (meta.py) and ifnone (basics.py), fastai's Module (torch_core.py).
ADDED: the imports above them (tsai gets these names through `from ..imports import *`, which pulls in fastai and
matplotlib), and this entry's constants after the imports.
Truth: correct given its mask: called as m(x, attn_mask=triu(ones(n, n), 1).bool()) (the bool convention it
documents, True = masked) it is mha_forward with W_Q, W_K, W_V, to_out[0] and all their biases, exactly (1e-10); the
(1, n, n) form documented in its docstring gives the same; without a mask it is bidirectional. Lesson rule not
followed: no divisibility check (d_model // n_heads). Its frozen scale parameter is a constant, not a weight.
"""
from typing import Optional
import inspect

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

TARGET = "MultiheadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("fastai-module-no-super-init", "frozen-scale-parameter", "keys-pre-transposed", "causal-only-through-mask-arg",
             "mask-bool-true-masked", "out-proj-in-sequential", "tuple-output", "no-divisibility-check")
FORWARD = "Q, K=None, V=None, prev=None, key_padding_mask=None, attn_mask=None"
NOTES = ("MultiheadAttention(d_model, n_heads, d_k=None, d_v=None, res_attention=False, attn_dropout=0., proj_dropout=0., "
         "qkv_bias=True, lsa=False). forward(Q, ...) -> (output (bs, len, d_model), attn_weights).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'rules'
DIAGNOSIS = 'no-divisibility-check'
EXPECTED_BECAUSE = ("the lesson's math given its True-is-masked attn_mask; its scale is a frozen nn.Parameter (a "
                    "constant); only the divisibility check is missing")

# ---- from fastcore 2.2.41 (fastcore/meta.py, lines 48-71; fastcore/basics.py, lines 82-85) and fastai 2.8.12
# (fastai/torch_core.py, lines 649-652), verbatim: the base class tsai's layers get through its star imports
# %% ../nbs/05_meta.ipynb #8f2b433f
def _rm_self(sig):
    sigd = dict(sig.parameters)
    sigd.pop('self')
    return sig.replace(parameters=sigd.values())

# %% ../nbs/05_meta.ipynb #fc72078d
class FixSigMeta(type):
    "A metaclass that fixes the signature on classes that override `__new__`"
    def __new__(cls, name, bases, dict):
        res = super().__new__(cls, name, bases, dict)
        if res.__init__ is not object.__init__: res.__signature__ = _rm_self(inspect.signature(res.__init__))
        return res

# %% ../nbs/05_meta.ipynb #6a52de3f
class PrePostInitMeta(FixSigMeta):
    "A metaclass that calls optional `__pre_init__` and `__post_init__` methods"
    def __call__(cls, *args, **kwargs):
        res = cls.__new__(cls)
        if type(res)==cls:
            if hasattr(res,'__pre_init__'): res.__pre_init__(*args,**kwargs)
            res.__init__(*args,**kwargs)
            if hasattr(res,'__post_init__'): res.__post_init__(*args,**kwargs)
        return res

# %% ../nbs/01_basics.ipynb #22d1b1cd
def ifnone(a, b):
    "`b` if `a` is None else `a`"
    return b if a is None else a

class Module(nn.Module, metaclass=PrePostInitMeta):
    "Same as `nn.Module`, but no need for subclasses to call `super().__init__`"
    def __pre_init__(self, *args, **kwargs): super().__init__()
    def __init__(self): pass


# %% ../../nbs/029_models.layers.ipynb #fb2f0441
class ScaledDotProductAttention(Module):
    r"""Scaled Dot-Product Attention module (Attention is all you need by Vaswani et al., 2017) with optional residual attention from previous layer
    (Realformer: Transformer likes residual attention by He et al, 2020) and locality self sttention (Vision Transformer for Small-Size Datasets
    by Lee et al, 2021)"""

    def __init__(self, d_model, n_heads, attn_dropout=0., res_attention=False, lsa=False):
        self.attn_dropout = nn.Dropout(attn_dropout)
        self.res_attention = res_attention
        head_dim = d_model // n_heads
        self.scale = nn.Parameter(torch.tensor(head_dim ** -0.5), requires_grad=lsa)
        self.lsa = lsa

    def forward(self, q:Tensor, k:Tensor, v:Tensor, prev:Optional[Tensor]=None, key_padding_mask:Optional[Tensor]=None, attn_mask:Optional[Tensor]=None):
        '''
        Input shape:
            q               : [bs x n_heads x max_q_len x d_k]
            k               : [bs x n_heads x d_k x seq_len]
            v               : [bs x n_heads x seq_len x d_v]
            prev            : [bs x n_heads x q_len x seq_len]
            key_padding_mask: [bs x seq_len]
            attn_mask       : [1 x seq_len x seq_len]

        Output shape:
            output:  [bs x n_heads x q_len x d_v]
            attn   : [bs x n_heads x q_len x seq_len]
            scores : [bs x n_heads x q_len x seq_len]
        '''

        # Scaled MatMul (q, k) - similarity scores for all pairs of positions in an input sequence
        attn_scores = torch.matmul(q, k) * self.scale      # attn_scores : [bs x n_heads x max_q_len x q_len]

        # Add pre-softmax attention scores from the previous layer (optional)
        if prev is not None: attn_scores = attn_scores + prev

        # Attention mask (optional)
        if attn_mask is not None:                                     # attn_mask with shape [q_len x seq_len] - only used when q_len == seq_len
            if attn_mask.dtype == torch.bool:
                attn_scores.masked_fill_(attn_mask, -np.inf)
            else:
                attn_scores += attn_mask

        # Key padding mask (optional)
        if key_padding_mask is not None:                              # mask with shape [bs x q_len] (only when max_w_len == q_len)
            attn_scores.masked_fill_(key_padding_mask.unsqueeze(1).unsqueeze(2), -np.inf)

        # normalize the attention weights
        attn_weights = F.softmax(attn_scores, dim=-1)                 # attn_weights   : [bs x n_heads x max_q_len x q_len]
        attn_weights = self.attn_dropout(attn_weights)

        # compute the new values given the attention weights
        output = torch.matmul(attn_weights, v)                        # output: [bs x n_heads x max_q_len x d_v]

        if self.res_attention: return output, attn_weights, attn_scores
        else: return output, attn_weights

# %% ../../nbs/029_models.layers.ipynb #440d5833
class MultiheadAttention(Module):
    def __init__(self, d_model, n_heads, d_k=None, d_v=None, res_attention=False, attn_dropout=0., proj_dropout=0., qkv_bias=True, lsa=False):
        """Multi Head Attention Layer

        Input shape:
            Q:       [batch_size (bs) x max_q_len x d_model]
            K, V:    [batch_size (bs) x q_len x d_model]
            mask:    [q_len x q_len]
        """

        d_k = ifnone(d_k, d_model // n_heads)
        d_v = ifnone(d_v, d_model // n_heads)

        self.n_heads, self.d_k, self.d_v = n_heads, d_k, d_v

        self.W_Q = nn.Linear(d_model, d_k * n_heads, bias=qkv_bias)
        self.W_K = nn.Linear(d_model, d_k * n_heads, bias=qkv_bias)
        self.W_V = nn.Linear(d_model, d_v * n_heads, bias=qkv_bias)

        # Scaled Dot-Product Attention (multiple heads)
        self.res_attention = res_attention
        self.sdp_attn = ScaledDotProductAttention(d_model, n_heads, attn_dropout=attn_dropout, res_attention=self.res_attention, lsa=lsa)

        # Poject output
        self.to_out = nn.Sequential(nn.Linear(n_heads * d_v, d_model), nn.Dropout(proj_dropout))


    def forward(self, Q:Tensor, K:Optional[Tensor]=None, V:Optional[Tensor]=None, prev:Optional[Tensor]=None,
                key_padding_mask:Optional[Tensor]=None, attn_mask:Optional[Tensor]=None):

        bs = Q.size(0)
        if K is None: K = Q
        if V is None: V = Q

        # Linear (+ split in multiple heads)
        q_s = self.W_Q(Q).reshape(bs, -1, self.n_heads, self.d_k).transpose(1,2)       # q_s    : [bs x n_heads x max_q_len x d_k]
        k_s = self.W_K(K).reshape(bs, -1, self.n_heads, self.d_k).permute(0,2,3,1)     # k_s    : [bs x n_heads x d_k x q_len] - transpose(1,2) + transpose(2,3)
        v_s = self.W_V(V).reshape(bs, -1, self.n_heads, self.d_v).transpose(1,2)       # v_s    : [bs x n_heads x q_len x d_v]

        # Apply Scaled Dot-Product Attention (multiple heads)
        if self.res_attention:
            output, attn_weights, attn_scores = self.sdp_attn(q_s, k_s, v_s, prev=prev, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        else:
            output, attn_weights = self.sdp_attn(q_s, k_s, v_s, key_padding_mask=key_padding_mask, attn_mask=attn_mask)
        # output: [bs x n_heads x q_len x d_v], attn: [bs x n_heads x q_len x q_len], scores: [bs x n_heads x max_q_len x q_len]

        # back to the original inputs dimensions
        output = output.transpose(1, 2).contiguous().reshape(bs, -1, self.n_heads * self.d_v) # output: [bs x q_len x n_heads * d_v]
        output = self.to_out(output)

        if self.res_attention: return output, attn_weights, attn_scores
        else: return output, attn_weights
