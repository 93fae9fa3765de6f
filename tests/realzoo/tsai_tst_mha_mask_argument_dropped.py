"""tsai's TST _MultiHeadAttention (tsai.models.TST, the Time Series Transformer): a fastai `Module` (no
super().__init__() in its __init__), W_Q/W_K/W_V Linear(d_model, d_k * n_heads, bias=False) with d_k and d_v
REQUIRED head widths, keys pre-transposed by .permute(0, 2, 3, 1), W_O Linear(n_heads * d_v, d_model, bias=False);
forward(Q, K, V, mask=None) takes a mask [q_len x q_len] - and never uses it: it builds a fresh
_ScaledDotProductAttention(self.d_k) in forward and calls it on (q_s, k_s, v_s) WITHOUT the mask, though that
module's forward takes one (masked_fill_(mask, -1e9)). Returns (output, attn).

Source: https://github.com/timeseriesAI/tsai (the PyPI project's repository), file tsai/models/TST.py as released in
tsai 1.0.1 on PyPI; the base class from https://github.com/fastai/fastai (fastai/torch_core.py, fastai 2.8.12) and
https://github.com/AnswerDotAI/fastcore (fastcore/meta.py and fastcore/basics.py, fastcore 2.2.41).
Licence: Apache-2.0 (tsai's LICENSE in its wheel's dist-info; the LICENSE files of fastcore and fastai, whose
three helpers are copied too, are Apache-2.0 as well; none carries a copyright line).
Copied: verbatim from the PyPI wheels tsai==1.0.1, fastai==2.8.12 and fastcore==2.2.41 (pip download --no-deps):
tsai/models/TST.py lines 14-68 (the classes _ScaledDotProductAttention and _MultiHeadAttention); fastcore's _rm_self,
FixSigMeta and PrePostInitMeta (meta.py) and ifnone (basics.py), fastai's Module (torch_core.py). ADDED: the imports
above them (tsai gets these names through `from ..imports import *`), and this entry's constants after the imports.
Truth: bug. Whatever mask it is given (a causal True = masked one, as its _ScaledDotProductAttention would take), its
output is mha_forward WITHOUT the mask (W_Q, W_K, W_V, W_O, no biases), exactly: the future moves the past. Its
model, TST, is an encoder that passes mask=None, so the dropped argument never shows there; as a causal layer, the
mask is missing.
"""
from typing import Optional
import inspect

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

TARGET = "_MultiHeadAttention"
TRUTH = "bug"
BUG = "mask argument never passed on (no-mask)"
RULE_GAPS = ("fastai-module-no-super-init", "keys-pre-transposed", "head-widths-required", "module-built-in-forward",
             "out-proj-no-bias", "tuple-output", "no-divisibility-check", "no-context-length")
FORWARD = "Q, K, V, mask=None"
NOTES = ("_MultiHeadAttention(d_model, n_heads, d_k, d_v). forward(Q, K, V, mask=None) -> (output (bs, len, d_model), "
         "attn); the mask is accepted and dropped.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'no-mask'
EXPECTED_BECAUSE = "forward accepts a mask and never passes it on: the lesson's layer without its causal mask"

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


# %% ../../nbs/049_models.TST.ipynb #434fa266
class _ScaledDotProductAttention(Module):
    def __init__(self, d_k:int): self.d_k = d_k
    def forward(self, q:Tensor, k:Tensor, v:Tensor, mask:Optional[Tensor]=None):

        # MatMul (q, k) - similarity scores for all pairs of positions in an input sequence
        scores = torch.matmul(q, k)                                         # scores : [bs x n_heads x q_len x q_len]
        
        # Scale
        scores = scores / (self.d_k ** 0.5)
        
        # Mask (optional)
        if mask is not None: scores.masked_fill_(mask, -1e9)
        
        # SoftMax
        attn = F.softmax(scores, dim=-1)                                    # attn   : [bs x n_heads x q_len x q_len]
        
        # MatMul (attn, v)
        context = torch.matmul(attn, v)                                     # context: [bs x n_heads x q_len x d_v]
        
        return context, attn

# %% ../../nbs/049_models.TST.ipynb #436b0397
class _MultiHeadAttention(Module):
    def __init__(self, d_model:int, n_heads:int, d_k:int, d_v:int):
        r"""
        Input shape:  Q, K, V:[batch_size (bs) x q_len x d_model], mask:[q_len x q_len]
        """
        self.n_heads, self.d_k, self.d_v = n_heads, d_k, d_v
        
        self.W_Q = nn.Linear(d_model, d_k * n_heads, bias=False)
        self.W_K = nn.Linear(d_model, d_k * n_heads, bias=False)
        self.W_V = nn.Linear(d_model, d_v * n_heads, bias=False)
        
        self.W_O = nn.Linear(n_heads * d_v, d_model, bias=False)

    def forward(self, Q:Tensor, K:Tensor, V:Tensor, mask:Optional[Tensor]=None):
        
        bs = Q.size(0)

        # Linear (+ split in multiple heads)
        q_s = self.W_Q(Q).view(bs, -1, self.n_heads, self.d_k).transpose(1,2)       # q_s    : [bs x n_heads x q_len x d_k]
        k_s = self.W_K(K).view(bs, -1, self.n_heads, self.d_k).permute(0,2,3,1)     # k_s    : [bs x n_heads x d_k x q_len] - transpose(1,2) + transpose(2,3)
        v_s = self.W_V(V).view(bs, -1, self.n_heads, self.d_v).transpose(1,2)       # v_s    : [bs x n_heads x q_len x d_v]

        # Scaled Dot-Product Attention (multiple heads)
        context, attn = _ScaledDotProductAttention(self.d_k)(q_s, k_s, v_s)          # context: [bs x n_heads x q_len x d_v], attn: [bs x n_heads x q_len x q_len]

        # Concat
        context = context.transpose(1, 2).contiguous().view(bs, -1, self.n_heads * self.d_v) # context: [bs x q_len x n_heads * d_v]

        # Linear
        output = self.W_O(context)                                                  # context: [bs x q_len x d_model]
        
        return output, attn
