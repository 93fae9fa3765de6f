"""SpeechBrain's MultiheadAttention: a wrapper of torch.nn.MultiheadAttention with the heads FIRST in the constructor
(nhead, d_model, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False, kdim=None, vdim=None); forward(query,
key, value, attn_mask=None, key_padding_mask=None, return_attn_weights=True, pos_embs=None) takes batch-first
tensors, PERMUTES them to time-first (the inner module is built without batch_first), hands attn_mask (bool True =
blocked, or float added) to the inner module, permutes the output back and returns (output, attention weights) by
default; a relative position embedding `pos_embs` is added to the mask IN PLACE (`attn_mask += pos_embs`), the
caller's tensor.  Causal only through attn_mask (SpeechBrain's decoders pass get_lookahead_mask: a float 0 / -inf
triu mask).

Source: https://github.com/speechbrain/speechbrain (the wheel's METADATA names https://speechbrain.github.io/), file
speechbrain/nnet/attention.py as released in speechbrain 0.5.16 on PyPI. Licence: Apache-2.0 (LICENSE in the wheel's
dist-info, classifier "License :: OSI Approved :: Apache Software License"; the file names its authors: Ju-Chieh Chou,
Jianyuan Zhong, Loren Lugosch, Samuele Cornell, 2020). Copied: verbatim from the PyPI wheel speechbrain==0.5.16 (pip
download --no-deps), every copied line compared by program with the unpacked wheel: attention.py lines 1-12 (module
docstring, torch, logging, nn), 14 (typing) and 642-780 (class MultiheadAttention, whole). Left out: lines 13 (numpy),
15 (speechbrain.dataio's length_to_mask), 16-17 (F, math) and 20 (logger), used only by the file's other classes, and
those classes. ADDED: this docstring and the entry's constants. Truth: correct (in _truth.py): MultiheadAttention(3,
12) in eval() called as m(x, x, x, attn_mask=triu(ones(n, n), 1) as bool)[0] = mha_forward with att.in_proj_weight's
row blocks [Q; K; V], in_proj_bias's thirds and att.out_proj, and the per-head loop; no leak; with the float 0 / -inf
mask the same; without a mask the future moves the past.
"""
"""Library implementing attention modules.

Authors
 * Ju-Chieh Chou 2020
 * Jianyuan Zhong 2020
 * Loren Lugosch 2020
 * Samuele Cornell 2020
"""

import torch
import logging
import torch.nn as nn
from typing import Optional


class MultiheadAttention(nn.Module):
    """ The class is a wrapper of MultiHead Attention for torch.nn.MultiHeadAttention.

    Reference: https://pytorch.org/docs/stable/nn.html

    Arguments
    ----------
    num_heads : int
        parallel attention heads.
    dropout : float
        a Dropout layer on attn_output_weights (default: 0.0).
    bias : bool
        add bias as module parameter (default: True).
    add_bias_kv : bool
        add bias to the key and value sequences at dim=0.
    add_zero_attn : bool
        add a new batch of zeros to the key and value sequences at dim=1.
    kdim : int
        total number of features in key (default: None).
    vdim : int
        total number of features in value (default: None).

    Example
    -------
    >>> inputs = torch.rand([8, 60, 512])
    >>> net = MultiheadAttention(nhead=8, d_model=inputs.shape[-1])
    >>> outputs, attn = net(inputs, inputs, inputs)
    >>> outputs.shape
    torch.Size([8, 60, 512])
    """

    def __init__(
        self,
        nhead,
        d_model,
        dropout=0.0,
        bias=True,
        add_bias_kv=False,
        add_zero_attn=False,
        kdim=None,
        vdim=None,
    ):
        super().__init__()

        self.att = nn.MultiheadAttention(
            embed_dim=d_model,
            num_heads=nhead,
            dropout=dropout,
            bias=bias,
            add_bias_kv=add_bias_kv,
            add_zero_attn=add_zero_attn,
            kdim=kdim,
            vdim=vdim,
        )

    def forward(
        self,
        query,
        key,
        value,
        attn_mask: Optional[torch.Tensor] = None,
        key_padding_mask: Optional[torch.Tensor] = None,
        return_attn_weights: bool = True,
        pos_embs: Optional[torch.Tensor] = None,
    ):
        """
        Arguments
        ----------
        query : torch.Tensor
            (B, L, E) where L is the target sequence length,
            B is the batch size, E is the embedding dimension.
        key : torch.Tensor
            (B, S, E) where S is the source sequence length,
            B is the batch size, E is the embedding dimension.
        value : torch.Tensor
            (B, S, E) where S is the source sequence length,
            B is the batch size, E is the embedding dimension.
        attn_mask : torch.Tensor, optional
            2D mask (L, S) where L is the target sequence length, S is
            the source sequence length.
            3D mask (N*num_heads, L, S) where N is the batch
            size, L is the target sequence length, S is the source sequence
            length. attn_mask ensure that position i is allowed to attend the
            unmasked positions. If a ByteTensor is provided, the non-zero
            positions are not allowed to attend while the zero positions will
            be unchanged. If a BoolTensor is provided, positions with True is
            not allowed to attend while False values will be unchanged. If a
            FloatTensor is provided, it will be added to the attention weight.
        key_padding_mask : torch.Tensor, optional
            (B, S) where B is the batch size, S is the source sequence
            length. If a ByteTensor is provided, the non-zero positions will
            be ignored while the position with the zero positions will be
            unchanged. If a BoolTensor is provided, the positions with the
            value of True will be ignored while the position with the value
            of False will be unchanged.
        return_attn_weights : bool, optional
            True to additionally return the attention weights, False otherwise.
        pos_embs : torch.Tensor, optional
            Positional embeddings added to the attention map of shape (L, S, E) or (L, S, 1).

        Outputs
        -------
        attn_output : torch.Tensor
            (B, L, E) where L is the target sequence length, B is the
            batch size, E is the embedding dimension.
        attn_output_weights : torch.Tensor
            (B, L, S) where B is the batch size, L is the target
            sequence length, S is the source sequence length.
            This is returned only if `return_attn_weights=True` (True by default).
        """
        # give tensors of shape (time, batch, fea)
        query = query.permute(1, 0, 2)
        key = key.permute(1, 0, 2)
        value = value.permute(1, 0, 2)

        # this will be legit because of https://github.com/pytorch/pytorch/blob/5288d05cfdda85c46c4df84617fa7f37c21b10b3/torch/nn/functional.py#L4946
        # we can inject relative learnable pos embeddings directly in MHA via the attn_mask
        if pos_embs is not None:
            if attn_mask is not None:
                attn_mask += pos_embs
            else:
                attn_mask = pos_embs

        output, attention_weights = self.att(
            query,
            key,
            value,
            attn_mask=attn_mask,
            key_padding_mask=key_padding_mask,
            need_weights=return_attn_weights,
        )

        # reshape the output back to (batch, time, fea)
        output = output.permute(1, 0, 2)

        if return_attn_weights:
            return output, attention_weights

        return output


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "MultiheadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("heads-first-constructor", "wraps-nn-multiheadattention", "permutes-to-time-first", "mask-argument",
             "tuple-output")
FORWARD = ("query, key, value, attn_mask=None, key_padding_mask=None, return_attn_weights=True, pos_embs=None")
NOTES = ("MultiheadAttention(nhead, d_model, dropout=0.0, bias=True, ...); forward(x, x, x, attn_mask) -> "
         "(output (B, n, d), weights (B, n, n)).")
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("nn.MultiheadAttention given the bool causal mask, batch-first outside; add_bias_kv is left off (it appends a "
                    "learned key/value position; it was read as the Q/K/V-bias switch before this batch)")
