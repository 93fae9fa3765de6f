"""fastNLP 1.0.1's MultiHeadAttention (fastNLP.modules.torch, the layer of its TransformerSeq2SeqEncoder and
Decoder): MultiHeadAttention(d_model=512, n_head=8, dropout=0.0, layer_idx=None), q_proj / k_proj / v_proj /
out_proj with biases, q scaled IN PLACE (`q *= self.scaling`) before the scores, heads kept as the LAST axis through
einsum ('bqnh,bknh->bqkn': scores (B, n_q, n_k, H)), softmax over dim=2 - here the keys -; a PADDING mask BESIDE the
causal one: forward(query, key, value, key_mask=None, attn_mask=None, state=None), key_mask (B, n_k) with 1 = attend,
attn_mask (n, n) lower-triangular 1 = keep (`attn_mask[None, :, :, None].eq(0)` filled with -inf), a decoder cache in
a TransformerState object (prev keys and values per layer_idx, picked when query, key and value share storage);
returns a TUPLE (output, attn_weights) with the weights laid out (B, n_q, n_k, H).

Source: https://pypi.org/project/FastNLP/1.0.1/ (the sdist's PKG-INFO names https://gitee.com/fastnlp/fastNLP as its
Home-page; earlier releases name https://github.com/fastnlp/fastNLP, the same project), file
fastNLP/modules/torch/attention.py as released in FastNLP 1.0.1.  The decoder passes attn_mask =
TransformerSeq2SeqDecoder._get_triangle_mask(tokens) (tril of ones) for a target longer than one token.
Licence: Apache-2.0 (LICENSE at the sdist's root, "Apache License Version 2.0"; PKG-INFO "License: Apache License";
PyPI holds 1.0.1 as an sdist only).
Copied: verbatim from the PyPI sdist FastNLP==1.0.1 (pip download --no-deps), every copied line compared by program
with the unpacked sdist: lines 7-12 (imports) and 49-155 (class MultiHeadAttention, whole).  Left out: lines 1-6
(__all__), line 13 `from .decoder.seq2seq_state import TransformerState` (replaced by the stand-in below, read only
by isinstance), lines 16-46 (DotAttention, not used by this class) and 156-end.  ADDED: the TransformerState
stand-in, this docstring and the entry's constants.
Truth: correct given its mask (in _truth.py): MultiHeadAttention(12, 3) in eval() called as m(x, x, x,
attn_mask=tril(ones(n, n)))[0] = mha_forward and the per-head loop exactly, no leak; with key_mask besides (the last
token of item 0 a pad) = the loop with that key hidden as well; without attn_mask the future moves the past.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


class TransformerState:  # added for the zoo: a stand-in for fastNLP's decoder state (only isinstance reads it here)
    pass


class MultiHeadAttention(nn.Module):
    """
    `Attention is all you need <https://arxiv.org/abs/1706.03762>`_ 中提到的多头注意力

    :param d_model:
    :param n_head:
    :param dropout:
    :param layer_idx:
    """
    def __init__(self, d_model: int = 512, n_head: int = 8, dropout: float = 0.0, layer_idx: int = None):
        super(MultiHeadAttention, self).__init__()
        self.d_model = d_model
        self.n_head = n_head
        self.dropout = dropout
        self.head_dim = d_model // n_head
        self.layer_idx = layer_idx
        assert d_model % n_head == 0, "d_model should be divisible by n_head"
        self.scaling = self.head_dim ** -0.5

        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

        self.reset_parameters()

    def forward(self, query, key, value, key_mask=None, attn_mask=None, state=None):
        """

        :param query: ``[batch, seq, dim]``
        :param key: ``[batch, seq, dim]``
        :param value: ``[batch, seq, dim]``
        :param key_mask: ``[batch, seq]`` 用于指示哪些 ``key`` 不要 attend 到；注意到 mask 为 **1** 的地方是要attend到的
        :param attn_mask: ``[seq, seq]``, 用于 mask 掉 attention map。 主要是用在训练时 decoder 端的 :class:`SelfAttention` ，
            下三角为 1。
        :param state: 过去的信息，在 inference 的时候会用到，比如 encoder output、decoder 的 prev kv。这样可以减少计算。
        :return:
        """
        assert key.size() == value.size()
        if state is not None:
            assert self.layer_idx is not None
        qkv_same = query.data_ptr() == key.data_ptr() == value.data_ptr()

        q = self.q_proj(query)  # batch x seq x dim
        q *= self.scaling
        k = v = None
        prev_k = prev_v = None

        # 从state中取kv
        if isinstance(state, TransformerState):  # 说明此时在inference阶段
            if qkv_same:  # 此时在decoder self attention
                prev_k = state.decoder_prev_key[self.layer_idx]
                prev_v = state.decoder_prev_value[self.layer_idx]
            else:  # 此时在decoder-encoder attention，直接将保存下来的key装载起来即可
                k = state.encoder_key[self.layer_idx]
                v = state.encoder_value[self.layer_idx]

        if k is None:
            k = self.k_proj(key)
            v = self.v_proj(value)

        if prev_k is not None:
            k = torch.cat((prev_k, k), dim=1)
            v = torch.cat((prev_v, v), dim=1)

        # 更新state
        if isinstance(state, TransformerState):
            if qkv_same:
                state.decoder_prev_key[self.layer_idx] = k
                state.decoder_prev_value[self.layer_idx] = v
            else:
                state.encoder_key[self.layer_idx] = k
                state.encoder_value[self.layer_idx] = v

        # 开始计算attention
        batch_size, q_len, d_model = query.size()
        k_len, v_len = k.size(1), v.size(1)
        q = q.reshape(batch_size, q_len, self.n_head, self.head_dim)
        k = k.reshape(batch_size, k_len, self.n_head, self.head_dim)
        v = v.reshape(batch_size, v_len, self.n_head, self.head_dim)

        attn_weights = torch.einsum('bqnh,bknh->bqkn', q, k)  # bs,q_len,k_len,n_head
        if key_mask is not None:
            _key_mask = ~key_mask[:, None, :, None].bool()  # batch,1,k_len,1
            attn_weights = attn_weights.masked_fill(_key_mask, -float('inf'))

        if attn_mask is not None:
            _attn_mask = attn_mask[None, :, :, None].eq(0)  # 1,q_len,k_len,n_head
            attn_weights = attn_weights.masked_fill(_attn_mask, -float('inf'))

        attn_weights = F.softmax(attn_weights, dim=2)
        attn_weights = F.dropout(attn_weights, p=self.dropout, training=self.training)

        output = torch.einsum('bqkn,bknh->bqnh', attn_weights, v)  # batch,q_len,n_head,head_dim
        output = output.reshape(batch_size, q_len, -1)
        output = self.out_proj(output)  # batch,q_len,dim

        return output, attn_weights

    def reset_parameters(self):
        nn.init.xavier_uniform_(self.q_proj.weight)
        nn.init.xavier_uniform_(self.k_proj.weight)
        nn.init.xavier_uniform_(self.v_proj.weight)
        nn.init.xavier_uniform_(self.out_proj.weight)

    def set_layer_idx(self, layer_idx):
        self.layer_idx = layer_idx


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("key-mask-beside-attn-mask", "attn-mask-keep-tril", "einsum-heads-last", "q-scaled-in-place",
             "state-object-cache", "tuple-output")
FORWARD = "query, key, value, key_mask=None, attn_mask=None, state=None"
NOTES = ("MultiHeadAttention(d_model, n_head, dropout, layer_idx); causal only through attn_mask (n, n) 1 = keep; "
         "key_mask (B, n) 1 = attend; returns (output, attn_weights (B, n, n, H)).")
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the lesson's layer given its causal attn_mask (n, n) 1 = keep, with biases, an assert on "
                    "divisibility; key_mask is a padding mask beside it, which a causal check leaves at None")
