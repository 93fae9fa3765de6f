"""nemo_toolkit 1.23.0's MultiHeadAttention (NeMo's NLP transformer: the self- and cross-attention of its
TransformerEncoder / TransformerDecoder for machine translation and language modelling):
MultiHeadAttention(hidden_size, num_attention_heads, attn_score_dropout=0.0, attn_layer_dropout=0.0) - divisibility
checked (ValueError), query_net / key_net / value_net / out_projection with biases, the scale SPLIT between the
queries and the keys (each divided by sqrt(sqrt(head width)) before the product, "for numerical stability"),
forward(queries, keys, values, attention_mask) with FOUR required arguments and NO causality of its own: the mask is
ADDITIVE, built by the caller with form_attention_mask(decoder_mask, diagonal=0): (B, 1, L, L), 0 where attended
and NEG_INF = -10000.0 (a FINITE fill) elsewhere; a dropout on the layer's output.

Source: https://github.com/nvidia/nemo (the wheel's METADATA Home-page), files
nemo/collections/nlp/modules/common/transformer/transformer_modules.py (MultiHeadAttention) and
nemo/collections/common/parts/transformer_utils.py (NEG_INF, form_attention_mask) as released in nemo_toolkit 1.23.0
on PyPI; TransformerDecoderBlock (transformer_decoders.py lines 56-58, 74) builds it as
MultiHeadAttention(hidden_size, num_attention_heads, attn_score_dropout, attn_layer_dropout) and calls
first_sub_layer(decoder_query, decoder_keys, decoder_keys, decoder_mask), with the mask of line 180,
form_attention_mask(decoder_mask, diagonal=self.diagonal) (diagonal 0 by default).
Licence: Apache-2.0 (LICENSE in the wheel's dist-info; the files' headers "Copyright (c) 2020, NVIDIA CORPORATION.
All rights reserved." and, for transformer_modules.py, "Copyright 2018 The Google AI Language Team Authors and The
HuggingFace Inc. team."; METADATA "License: Apache2").
Copied: verbatim from the PyPI wheel nemo_toolkit==1.23.0 (pip download --no-deps), every copied line compared by
program with the unpacked wheel: transformer_modules.py lines 17 and 19-21 (imports) and 150-214 (class
MultiHeadAttention, whole); transformer_utils.py lines 20 (NEG_INF) and 23-48 (form_attention_mask, whole).  Left
out: the rest of both files (embeddings, the feed-forward, the attention bridge, weight initialisation), the import
of form_attention_mask and NeMo's logging (lines 24-25: the class uses neither).
ADDED: this docstring, the factory `build` (MultiHeadAttention plus a forward(x) that passes x as queries, keys and
values and the decoder's mask form_attention_mask(ones(B, L), diagonal=0), as TransformerDecoderBlock does for a
batch without padding) and the entry's constants.
Truth: correct (in _truth.py): MultiHeadAttention(12, 3) in eval() given form_attention_mask(ones(B, n), 0) =
mha_forward (all four Linears with their biases) and the per-head loop (1.8e-15), no leak; given
no mask (None) the future moves the past; the -10000 fill leaks with W_k = -W_q and the tokens x1e3; a padded key 0
(decoder_mask 0 there) is hidden from the later queries.
"""
import math
import numpy as np
import torch
from torch import nn

NEG_INF = -10000.0


def form_attention_mask(input_mask, diagonal=None):
    """
    Build attention mask with optional masking of future tokens we forbid
    to attend to (e.g. as it is in Transformer decoder).

    Args:
        input_mask: binary mask of size B x L with 1s corresponding to valid
            tokens and 0s corresponding to padding tokens
        diagonal: diagonal where triangular future mask starts
            None -- do not mask anything
            0 -- regular translation or language modeling future masking
            1 -- query stream masking as in XLNet architecture
    Returns:
        attention_mask: mask of size B x 1 x L x L with 0s corresponding to
            tokens we plan to attend to and -10000 otherwise
    """

    if input_mask is None:
        return None
    attn_shape = (1, input_mask.shape[1], input_mask.shape[1])
    attn_mask = input_mask.to(dtype=bool).unsqueeze(1)
    if diagonal is not None:
        future_mask = torch.tril(torch.ones(attn_shape, dtype=torch.bool, device=input_mask.device), diagonal)
        attn_mask = attn_mask & future_mask
    attention_mask = (1 - attn_mask.to(torch.float)) * NEG_INF
    return attention_mask.unsqueeze(1)


class MultiHeadAttention(nn.Module):
    """
    Multi-head scaled dot-product attention layer.

    Args:
        hidden_size: size of the embeddings in the model, also known as d_model
        num_attention_heads: number of heads in multi-head attention
        attn_score_dropout: probability of dropout applied to attention scores
        attn_layer_dropout: probability of dropout applied to the output of the
            whole layer, but before layer normalization
    """

    def __init__(self, hidden_size, num_attention_heads, attn_score_dropout=0.0, attn_layer_dropout=0.0):
        super().__init__()
        if hidden_size % num_attention_heads != 0:
            raise ValueError(
                "The hidden size (%d) is not a multiple of the number "
                "of attention heads (%d)" % (hidden_size, num_attention_heads)
            )
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.attn_head_size = int(hidden_size / num_attention_heads)
        self.attn_scale = math.sqrt(math.sqrt(self.attn_head_size))

        self.query_net = nn.Linear(hidden_size, hidden_size)
        self.key_net = nn.Linear(hidden_size, hidden_size)
        self.value_net = nn.Linear(hidden_size, hidden_size)
        self.out_projection = nn.Linear(hidden_size, hidden_size)

        self.attn_dropout = nn.Dropout(attn_score_dropout)
        self.layer_dropout = nn.Dropout(attn_layer_dropout)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attn_head_size)
        x = x.view(*new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, queries, keys, values, attention_mask):

        # attention_mask is needed to hide the tokens which correspond to [PAD]
        # in the case of BERT, or to hide the future tokens in the case of
        # vanilla language modeling and translation
        query = self.query_net(queries)
        key = self.key_net(keys)
        value = self.value_net(values)
        query = self.transpose_for_scores(query) / self.attn_scale
        key = self.transpose_for_scores(key) / self.attn_scale
        value = self.transpose_for_scores(value)

        # for numerical stability we pre-divide query and key by sqrt(sqrt(d))
        attention_scores = torch.matmul(query, key.transpose(-1, -2))
        if attention_mask is not None:
            attention_scores = attention_scores + attention_mask.to(attention_scores.dtype)
        attention_probs = torch.softmax(attention_scores, dim=-1)
        attention_probs = self.attn_dropout(attention_probs)

        context = torch.matmul(attention_probs, value)
        context = context.permute(0, 2, 1, 3).contiguous()
        new_context_shape = context.size()[:-2] + (self.hidden_size,)
        context = context.view(*new_context_shape)

        # output projection
        output_states = self.out_projection(context)
        output_states = self.layer_dropout(output_states)
        return output_states


# --- added for the zoo: the decoder's call, as TransformerDecoderBlock makes it for a batch without padding ---
class _DecoderSelfAttention(nn.Module):
    def __init__(self, hidden_size, num_attention_heads, attn_score_dropout=0.0, attn_layer_dropout=0.0):
        super().__init__()
        self.first_sub_layer = MultiHeadAttention(
            hidden_size, num_attention_heads, attn_score_dropout, attn_layer_dropout
        )

    def forward(self, x):
        decoder_mask = torch.ones(x.shape[0], x.shape[1], device=x.device)
        return self.first_sub_layer(x, x, x, form_attention_mask(decoder_mask, diagonal=0))


def build(d_model, num_heads, context_length):
    return _DecoderSelfAttention(d_model, num_heads)
# --- end of the added factory ---


# what mha-check must report (tests/e2e/test_realzoo.py)
TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("scale-split-between-q-and-k", "required-additive-mask", "mask-from-caller", "finite-fill-1e4",
             "spelled-out-names", "no-context-length")
FORWARD = "queries, keys, values, attention_mask"
NOTES = ("MultiHeadAttention(hidden_size, num_attention_heads, ...): causal only through the caller's additive mask "
         "(0 / -10000, (B, 1, L, L)); q and k each divided by sqrt(sqrt(dh)).")
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the lesson's layer with the scale split between q and k (each / dh ** 0.25: the same scores), "
                    "divisibility refused, every bias; causal through the caller's additive mask, which mha-check "
                    "gives (its own -10000 fill lives in the caller's form_attention_mask, not in the layer)")
