"""fastNLP 0.5.0's MultiHeadAttention (the Transformer encoder's attention of fastNLP.modules.encoder): an UNUSUAL
constructor vocabulary MultiHeadAttention(input_size, key_size, value_size, num_head, dropout=0.1) - key_size and
value_size are the widths of ONE head (q_in, k_in Linear(input_size, key_size * num_head), v_in Linear(input_size,
key_size * num_head) viewed as value_size per head), `out` Linear(value_size * num_head, input_size); forward(Q, K,
V, atte_mask_out=None), the mask bool True = masked, (B, n_q, n_k) (indexed [:, None, :, :]); a DotAttention module
divides by sqrt(key_size), fills masked_fill_(mask_out, -1e9) in place and applies `nn.Softmax(dim=2)` - on scores
(B, H, n_q, n_k) that is the QUERY axis: each key's column is normalised over the queries.

Source: https://github.com/fastnlp/fastNLP (the wheel's METADATA Home-page), file fastNLP/modules/encoder/attention.py
as released in FastNLP 0.5.0 on PyPI.  FastNLP 0.5.5 has the fix (`nn.Softmax(dim=2)` -> `nn.Softmax(dim=-1)`, the
only change of code in the file: see fastnlp_0_5_5_mha_key_size_value_size_mask_out_fill_1e9.py).
Licence: Apache-2.0 (LICENSE in the wheel's dist-info, "Apache License Version 2.0"; METADATA "License: Apache
License").
Copied: verbatim from the PyPI wheel FastNLP==0.5.0 (pip download --no-deps), every copied line compared by program
with the unpacked wheel: lines 9-14 (imports) and 18-105 (class DotAttention and class MultiHeadAttention, whole).
Left out: lines 1-8 (module docstring, __all__), line 15 `from fastNLP.modules.utils import initial_parameter` (used
by the file's SelfAttention only) and lines 106-end (_masked_softmax, BiAttention, SelfAttention).  ADDED: the factory
`build` at the end (key_size = value_size = d_model // num_heads, the one head width fastNLP's TransformerEncoder
expects), this docstring and the entry's constants.
Truth: BUG (in _truth.py): MultiHeadAttention(12, 4, 4, 3) in eval() called as m(x, x, x, triu(ones(n, n), 1) per
item, True = masked) is NOT the lesson's layer: it equals an independent per-head loop whose softmax runs over the
queries (column-normalised, -1e9 fill) exactly, differs from mha_forward, and position 0 moves when a later token
changes (the future leaks through each key's normalisation over later queries).  With nn.Softmax(dim=-1) restored
(FastNLP 0.5.5) the same weights give mha_forward exactly.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

class DotAttention(nn.Module):
    """
    Transformer当中的DotAttention
    """

    def __init__(self, key_size, value_size, dropout=0.0):
        super(DotAttention, self).__init__()
        self.key_size = key_size
        self.value_size = value_size
        self.scale = math.sqrt(key_size)
        self.drop = nn.Dropout(dropout)
        self.softmax = nn.Softmax(dim=2)

    def forward(self, Q, K, V, mask_out=None):
        """

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
    """
    Transformer当中的MultiHeadAttention
    """

    def __init__(self, input_size, key_size, value_size, num_head, dropout=0.1):
        """
        
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
        """

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
TRUTH = "bug"
BUG = "softmax-wrong-axis"
RULE_GAPS = ("key-size-value-size-per-head-widths", "mask-argument-true-is-masked", "finite-fill-1e9",
             "softmax-module", "no-divisibility-check")
FORWARD = "Q, K, V, atte_mask_out=None"
NOTES = ("MultiHeadAttention(input_size, key_size, value_size, num_head, dropout=0.1); key_size = value_size = the "
         "width of one head; causal only through atte_mask_out (B, n, n) bool True = masked.")
OUTCOME = 'fail'
DIAGNOSIS = 'softmax-wrong-axis'
EXPECTED_BECAUSE = ("DotAttention's nn.Softmax(dim=2) normalises (B, H, n_q, n_k) scores over the queries: the "
                    "future leaks into the past (each key's weights are shared out among later queries), the "
                    "lesson's softmax-wrong-axis exactly; fixed in FastNLP 0.5.5")
