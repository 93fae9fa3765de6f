"""MultiHeadAttention from FuxiCTR (Huawei Noah's Ark CTR library; the attention layer of AutoInt / DESTINE / InterHAt) before "Fix split heads issue in multi-head attention (#30)": heads split with view(B*H, -1, dh) straight from (B, n, H*dh).

Source: https://github.com/reczoo/FuxiCTR/blob/2008dafa355b78192eefa00953ade914be65ba55/fuxictr/pytorch/layers/attention.py (lines 24-45: class ScaledDotProductAttention; lines 48-108: class MultiHeadAttention); commit "fix #19 fix #20 fix #21" on refs/heads/main.
Licence: Apache-2.0 (file header: "Copyright (C) 2021. Huawei Technologies Co., Ltd. All rights reserved." and "Copyright (C) 2018. pengshuang@Github for ScaledDotProductAttention."; LICENSE at the repository root)
Copied: verbatim (classes ScaledDotProductAttention and MultiHeadAttention); `import torch`, `from torch import nn`, `import numpy as np` as in the original.
Truth: BUG, wrong split/merge view order: after the projections (B, n, H*dh) the heads are split with query.view(batch_size * num_heads, -1, attention_dim) - no view(B, n, H, dh).transpose(1, 2) - so each "head" row mixes features of DIFFERENT tokens (with n = H, head h of batch b sees token blocks, not feature blocks), and the merge output.view(batch_size, -1, output_dim) undoes nothing. Also, this layer differs from the lesson's by design: it is bidirectional (it is a feature-interaction layer; the `mask` argument cannot be used - `if mask:` on a multi-element tensor raises), use_scale=False by DEFAULT (no 1/sqrt(dh) scaling unless use_scale=True), no output projection (W_res only when input_dim != H*dh), residual added by default, and a ReLU on the output. Evidence: issue https://github.com/reczoo/FuxiCTR/issues/30 ("MultiHeadAttention bug when num_heads is greater than 1": the split "is buggy, without transpose the shape"; labelled bug, closed) and fix commit https://github.com/reczoo/FuxiCTR/commit/abd51820d210b4d25f96f027c48e1ff18441441a ("Fix split heads issue in multi-head attention (#30)").
"""
import torch
from torch import nn
import numpy as np

TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "split-view-order"
RULE_GAPS = ("not-causal", "no-scaling-by-default", "no-output-projection", "residual-and-relu-inside", "tuple-output")
FORWARD = "query, key, value, mask=None"
NOTES = ("Constructor MultiHeadAttention(input_dim, attention_dim=None, num_heads=1, dropout_rate=0., use_residual=True, use_scale=False, "
         "layer_norm=False, align_to='input'): attention_dim is the HEAD width (default input_dim // num_heads), d_out = num_heads*attention_dim. "
         "Q/K/V Linear(input_dim, d_out, bias=False); no output projection when input_dim == d_out. forward(query, key, value, mask=None) "
         "returns a TUPLE (relu(output [+ residual]), attention); MultiHeadSelfAttention(...)(X) in the same file returns only the output. "
         "NOT a causal layer and no usable mask (a tensor mask raises in `if mask:`). Split AND merge use view without transpose; scores "
         "are unscaled unless use_scale=True. With num_heads=1 the view-order bug vanishes.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = None
EXPECTED_BECAUSE = ('not a causal layer: it leaks under the one way of calling it that runs (a tensor mask raises in '
                    '`if mask:`), and it has no output projection; the trace marks both (no mask, no projection), so '
                    'no single mistake is named (issue 28: before, output-shape could not tell how to call it)')


class ScaledDotProductAttention(nn.Module):
    """ Scaled Dot-Product Attention 
    Ref: https://zhuanlan.zhihu.com/p/47812375
    """
    def __init__(self, dropout_rate=0.):
        super(ScaledDotProductAttention, self).__init__()
        self.dropout = None
        if dropout_rate > 0:
            self.dropout = nn.Dropout(dropout_rate)
        self.softmax = nn.Softmax(dim=2)

    def forward(self, W_q, W_k, W_v, scale=None, mask=None):
        attention = torch.bmm(W_q, W_k.transpose(1, 2))
        if scale:
            attention = attention / scale
        if mask:
            attention = attention.masked_fill_(mask, -np.inf)
        attention = self.softmax(attention)
        if self.dropout is not None:
            attention = self.dropout(attention)
        output = torch.bmm(attention, W_v)
        return output, attention


class MultiHeadAttention(nn.Module):
    """ Multi-head attention module """

    def __init__(self, input_dim, attention_dim=None, num_heads=1, dropout_rate=0., 
                 use_residual=True, use_scale=False, layer_norm=False, align_to="input"):
        super(MultiHeadAttention, self).__init__()
        if attention_dim is None:
            attention_dim = input_dim // num_heads
        self.attention_dim = attention_dim
        self.output_dim = num_heads * attention_dim
        self.num_heads = num_heads
        self.use_residual = use_residual
        self.align_to = align_to
        self.scale = attention_dim ** 0.5 if use_scale else None
        self.W_q = nn.Linear(input_dim, self.output_dim, bias=False)
        self.W_k = nn.Linear(input_dim, self.output_dim, bias=False)
        self.W_v = nn.Linear(input_dim, self.output_dim, bias=False)
        if input_dim != self.output_dim:
            if align_to == "output":
                self.W_res = nn.Linear(input_dim, self.output_dim, bias=False)
            elif align_to == "input":
                self.W_res = nn.Linear(self.output_dim, input_dim, bias=False)
        else:
            self.W_res = None
        self.dot_product_attention = ScaledDotProductAttention(dropout_rate)
        self.layer_norm = nn.LayerNorm(self.output_dim) if layer_norm else None
        self.dropout = nn.Dropout(dropout_rate) if dropout_rate > 0 else None

    def forward(self, query, key, value, mask=None):
        residual = query
        
        # linear projection
        query = self.W_q(query)
        key = self.W_k(key)
        value = self.W_v(value)
        
        # split by heads
        batch_size = query.size(0)
        query = query.view(batch_size * self.num_heads, -1, self.attention_dim)
        key = key.view(batch_size * self.num_heads, -1, self.attention_dim)
        value = value.view(batch_size * self.num_heads, -1, self.attention_dim)
        if mask:
            mask = mask.repeat(self.num_heads, 1, 1)
        # scaled dot product attention
        output, attention = self.dot_product_attention(query, key, value, self.scale, mask)
        # concat heads
        output = output.view(batch_size, -1, self.output_dim)
        # final linear projection
        if self.W_res is not None:
            if self.align_to == "output": # AutoInt style
                residual = self.W_res(residual)
            elif self.align_to == "input": # Transformer stype
                output = self.W_res(output)
        if self.dropout is not None:
            output = self.dropout(output)
        if self.use_residual:
            output = output + residual
        if self.layer_norm is not None:
            output = self.layer_norm(output)
        output = output.relu()
        return output, attention
