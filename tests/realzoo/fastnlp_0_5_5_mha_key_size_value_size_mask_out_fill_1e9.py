"""fastNLP 0.5.5's MultiHeadAttention: the class of FastNLP 0.5.0 (fastnlp_0_5_mha_key_size_value_size_softmax_query_axis_pre_fix.py)
after the fix - DotAttention's `nn.Softmax(dim=-1)` (over the keys) where 0.5.0 had dim=2 (the queries).  Unusual
constructor vocabulary MultiHeadAttention(input_size, key_size, value_size, num_head, dropout=0.1): key_size and
value_size are the widths of ONE head; q_in / k_in / v_in / out Linears with biases; forward(Q, K, V,
atte_mask_out=None), the mask bool True = masked, (B, n_q, n_k) (indexed [:, None, :, :]), filled in place with -1e9;
scores divided by sqrt(key_size); nothing checks that the heads divide a width (there is none to divide).

Source: https://github.com/fastnlp/fastNLP (the sdist's PKG-INFO Home-page), file fastNLP/modules/encoder/attention.py
as released in FastNLP 0.5.5 on PyPI (PyPI holds 0.5.5 as an sdist only; its LICENSE read at the sdist's root).
Licence: Apache-2.0 (LICENSE at the sdist's root, "Apache License Version 2.0"; PKG-INFO "License: Apache License").
Copied: verbatim from the PyPI sdist FastNLP==0.5.5 (pip download --no-deps), every copied line compared by program
with the unpacked sdist: lines 9-14 (imports) and 18-105 (class DotAttention and class MultiHeadAttention, whole).
Left out: lines 1-8 (module docstring, __all__), line 15 `from fastNLP.modules.utils import initial_parameter` (used
by the file's SelfAttention only) and lines 106-end.  Compared with 0.5.0 the copied lines differ in the r-prefixes
of their docstrings and in line 29 (the fix) only.  ADDED: the factory `build` at the end (key_size = value_size =
d_model // num_heads, the one head width fastNLP's TransformerEncoder expects), this docstring and the entry's
constants.
Truth: correct given its mask (in _truth.py): MultiHeadAttention(12, 4, 4, 3) in eval() called as m(x, x, x,
triu(ones(n, n), 1) per item, True = masked) = mha_forward (q_in, k_in, v_in, out with their biases) and the per-head
loop exactly, no leak; without the mask it is bidirectional; the -1e9 fill leaks once the scores fall below it.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

class DotAttention(nn.Module):
    r"""
    Transformer当中的DotAttention
    """

    def __init__(self, key_size, value_size, dropout=0.0):
        super(DotAttention, self).__init__()
        self.key_size = key_size
        self.value_size = value_size
        self.scale = math.sqrt(key_size)
        self.drop = nn.Dropout(dropout)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, Q, K, V, mask_out=None):
        r"""

        :param Q: [..., seq_len_q, key_size]
        :param K: [..., seq_len_k, key_size]
        :param V: [..., seq_len_k, value_size]
        :param mask_out: [..., 1, seq_len] or [..., seq_len_q, seq_len_k]
        """
        output = torch.matmul(Q, K.transpose(-1, -2)) / self.scale
        if mask_out is not None:
            output.masked_fill_(mask_out, -1e9)
        output = self.softmax(output)
        output = self.drop(output)
        return torch.matmul(output, V)


class MultiHeadAttention(nn.Module):
    r"""
    Transformer当中的MultiHeadAttention
    """

    def __init__(self, input_size, key_size, value_size, num_head, dropout=0.1):
        r"""
        
        :param input_size: int, 输入维度的大小。同时也是输出维度的大小。
        :param key_size: int, 每个head的维度大小。
        :param value_size: int，每个head中value的维度。
        :param num_head: int，head的数量。
        :param dropout: float。
        """
        super(MultiHeadAttention, self).__init__()
        self.input_size = input_size
        self.key_size = key_size
        self.value_size = value_size
        self.num_head = num_head

        in_size = key_size * num_head
        self.q_in = nn.Linear(input_size, in_size)
        self.k_in = nn.Linear(input_size, in_size)
        self.v_in = nn.Linear(input_size, in_size)
        self.attention = DotAttention(key_size=key_size, value_size=value_size, dropout=dropout)
        self.out = nn.Linear(value_size * num_head, input_size)
        self.reset_parameters()

    def reset_parameters(self):
        sqrt = math.sqrt
        nn.init.normal_(self.q_in.weight, mean=0, std=sqrt(1.0 / self.input_size))
        nn.init.normal_(self.k_in.weight, mean=0, std=sqrt(1.0 / self.input_size))
        nn.init.normal_(self.v_in.weight, mean=0, std=sqrt(1.0 / self.input_size))
        nn.init.normal_(self.out.weight, mean=0, std=sqrt(1.0 / self.input_size))

    def forward(self, Q, K, V, atte_mask_out=None):
        r"""

        :param Q: [batch, seq_len_q, model_size]
        :param K: [batch, seq_len_k, model_size]
        :param V: [batch, seq_len_k, model_size]
        :param seq_mask: [batch, seq_len]
        """
        batch, sq, _ = Q.size()
        sk = K.size(1)
        d_k, d_v, n_head = self.key_size, self.value_size, self.num_head
        # input linear
        q = self.q_in(Q).view(batch, sq, n_head, d_k).transpose(1, 2)
        k = self.k_in(K).view(batch, sk, n_head, d_k).transpose(1, 2)
        v = self.v_in(V).view(batch, sk, n_head, d_v).transpose(1, 2)

        if atte_mask_out is not None:
            atte_mask_out = atte_mask_out[:,None,:,:] # [bsz,1,1,len]
        atte = self.attention(q, k, v, atte_mask_out).view(batch, n_head, sq, d_v)

        # concat all heads, do output linear
        atte = atte.transpose(1, 2).contiguous().view(batch, sq, -1)
        output = self.out(atte)
        return output


def build(d_model, num_heads, context_length=None):  # added for the zoo: as TransformerEncoder.SubLayer builds it
    return MultiHeadAttention(d_model, d_model // num_heads, d_model // num_heads, num_heads)


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "build"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("key-size-value-size-per-head-widths", "mask-argument-true-is-masked", "finite-fill-1e9",
             "softmax-module", "no-divisibility-check")
FORWARD = "Q, K, V, atte_mask_out=None"
NOTES = ("MultiHeadAttention(input_size, key_size, value_size, num_head, dropout=0.1); key_size = value_size = the "
         "width of one head; causal only through atte_mask_out (B, n, n) bool True = masked.")
OUTCOME = 'rules'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the lesson's math given its (B, n, n) True-is-masked mask argument; the -1e9 fill (mask-fill) "
                    "and the factory's unchecked d_model // num_heads (divisibility) are rules only, no mistake "
                    "named (as transformerkit's -1e9 entry)")
