"""CyberZHG's torch-multi-head-attention: MultiHeadAttention(in_features, head_num, bias=True, activation=F.relu),
the PyTorch port of his keras-multi-head; four Linear(in_features, in_features) named linear_q, linear_k, linear_v,
linear_o, an ACTIVATION (ReLU by default) applied after each of the four, heads folded into the batch axis
(reshape + permute to (batch * head_num, seq_len, sub_dim)), a ScaledDotProductAttention module that fills
`mask == 0` with -1e9, and causality only through the forward's mask argument: forward(q, k, v, mask=None), the mask
(B, n, n) made by the static gen_history_mask(x) (tril of ones), repeated head_num times with mask.repeat.

Source: https://github.com/CyberZHG/torch-multi-head-attention (torch-multi-head-attention 0.15.1 on PyPI, the
distribution's Home-page), file torch_multi_head_attention/multi_head_attention.py as released in
torch-multi-head-attention 0.15.1 (the latest release).
Licence: MIT (the sdist's PKG-INFO "License: MIT" and classifier "License :: OSI Approved :: MIT License", author
CyberZHG; the sdist carries no licence file).
Copied: verbatim from the PyPI sdist torch-multi-head-attention==0.15.1 (pip download --no-deps): the whole of
torch_multi_head_attention/multi_head_attention.py (lines 1-95).
ADDED: this entry's constants.
Truth: with activation=None and the history mask, mha_forward exactly (linear_q/k/v/o and their biases; exp(-1e9 - s)
underflows), no leak.  As built by default (activation=F.relu) it is relu(W_o concat_h(softmax(...) relu(x W_v^T +
b_v)) + b_o) with relu'd queries and keys: a layer that is not the lesson's (it differs by 8.1 in _truth.py), by
design (the package's documented activation).  A second real defect, outside what a causal check can see: the mask is
repeated with mask.repeat(head_num, 1, 1) (batch-folded index i takes mask[i % B]) while the heads are folded
batch-major (i = b * head_num + h), so per-item padding masks are mixed across batch items: item 0's output changes by
7.2 when item 1 with another mask sits beside it (in _truth.py).  The same causal mask for every item is unaffected.
"""
import math
import torch
import torch.nn as nn
import torch.nn.functional as F


__all__ = ['MultiHeadAttention', 'ScaledDotProductAttention']


class ScaledDotProductAttention(nn.Module):

    def forward(self, query, key, value, mask=None):
        dk = query.size()[-1]
        scores = query.matmul(key.transpose(-2, -1)) / math.sqrt(dk)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        attention = F.softmax(scores, dim=-1)
        return attention.matmul(value)


class MultiHeadAttention(nn.Module):

    def __init__(self,
                 in_features,
                 head_num,
                 bias=True,
                 activation=F.relu):
        """Multi-head attention.

        :param in_features: Size of each input sample.
        :param head_num: Number of heads.
        :param bias: Whether to use the bias term.
        :param activation: The activation after each linear transformation.
        """
        super(MultiHeadAttention, self).__init__()
        if in_features % head_num != 0:
            raise ValueError('`in_features`({}) should be divisible by `head_num`({})'.format(in_features, head_num))
        self.in_features = in_features
        self.head_num = head_num
        self.activation = activation
        self.bias = bias
        self.linear_q = nn.Linear(in_features, in_features, bias)
        self.linear_k = nn.Linear(in_features, in_features, bias)
        self.linear_v = nn.Linear(in_features, in_features, bias)
        self.linear_o = nn.Linear(in_features, in_features, bias)

    def forward(self, q, k, v, mask=None):
        q, k, v = self.linear_q(q), self.linear_k(k), self.linear_v(v)
        if self.activation is not None:
            q = self.activation(q)
            k = self.activation(k)
            v = self.activation(v)

        q = self._reshape_to_batches(q)
        k = self._reshape_to_batches(k)
        v = self._reshape_to_batches(v)
        if mask is not None:
            mask = mask.repeat(self.head_num, 1, 1)
        y = ScaledDotProductAttention()(q, k, v, mask)
        y = self._reshape_from_batches(y)

        y = self.linear_o(y)
        if self.activation is not None:
            y = self.activation(y)
        return y

    @staticmethod
    def gen_history_mask(x):
        """Generate the mask that only uses history data.

        :param x: Input tensor.
        :return: The mask.
        """
        batch_size, seq_len, _ = x.size()
        return torch.tril(torch.ones(seq_len, seq_len)).view(1, seq_len, seq_len).repeat(batch_size, 1, 1)

    def _reshape_to_batches(self, x):
        batch_size, seq_len, in_feature = x.size()
        sub_dim = in_feature // self.head_num
        return x.reshape(batch_size, seq_len, self.head_num, sub_dim)\
                .permute(0, 2, 1, 3)\
                .reshape(batch_size * self.head_num, seq_len, sub_dim)

    def _reshape_from_batches(self, x):
        batch_size, seq_len, in_feature = x.size()
        batch_size //= self.head_num
        out_dim = in_feature * self.head_num
        return x.reshape(batch_size, self.head_num, seq_len, in_feature)\
                .permute(0, 2, 1, 3)\
                .reshape(batch_size, seq_len, out_dim)

    def extra_repr(self):
        return 'in_features={}, head_num={}, bias={}, activation={}'.format(
            self.in_features, self.head_num, self.bias, self.activation,
        )


TARGET = "MultiHeadAttention"
TRUTH = "bug"
BUG = "relu activation after every projection by default (the package's design); per-item masks mixed by repeat"
RULE_GAPS = ("mask-argument-required-for-causality", "fill-1e9", "heads-folded-into-batch", "activation-default-relu",
             "query-key-value-arguments")
FORWARD = "q, k, v, mask=None"
NOTES = ("MultiHeadAttention(in_features, head_num, bias=True, activation=F.relu); forward(q, k, v, "
         "mask=MultiHeadAttention.gen_history_mask(x)) -> (B, n, in_features)")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'cannot_tell'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("causal through the mask argument (the call is found), but the ReLU after every projection is "
                    "in no reading and no known mistake: no mapping of the four Linears is proven, so the reference "
                    "comparison cannot be judged - nothing is failed or named without it")
