"""RecBole's MultiHeadAttention (SASRec, BERT4Rec and the other sequential recommenders of RecBole): the BERT layer -
MultiHeadAttention(n_heads, hidden_size, hidden_dropout_prob, attn_dropout_prob, layer_norm_eps) with query / key /
value / dense Linear layers, keys pre-permuted (0, 2, 3, 1), an ADDITIVE attention_mask ARGUMENT (required; SASRec's
get_attention_mask gives 0 / -10000, (B, 1, L, L)), an nn.Softmax module, and the residual and a POST-LayerNorm
INSIDE: LayerNorm(dense(context) + input_tensor).

Source: https://github.com/RUCAIBox/RecBole (recbole 1.2.1 on PyPI, the distribution's Home-page), file
recbole/model/layers.py as released in recbole 1.2.1.
Licence: MIT (the wheel's dist-info LICENSE, "Copyright (c) 2020 RUCAIBox", and its METADATA classifier).
Copied: verbatim from the PyPI wheel recbole==1.2.1 (pip download --no-deps): lines 18-24 of
recbole/model/layers.py (imports; line 25's normal_ and line 27's recbole.utils serve other classes) and lines
392-476 (MultiHeadAttention).
ADDED: this entry's constants.
Truth: correct given its mask: with an additive causal mask (0 on and below the diagonal, -inf above) and dropout
off, LayerNorm(mha_forward(x) + x) (query/key/value/dense as W_q/W_k/W_v/W_o with their biases, the LayerNorm's
weight and bias), exactly; no leak. Its recommenders pass -10000 instead of -inf (a finite fill, BERT's convention):
that is the model's choice, not this layer's, and is not judged here.
"""

import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as fn

TARGET = "MultiHeadAttention"
TRUTH = "correct"
BUG = None
RULE_GAPS = ("additive-mask-argument-required", "post-layernorm-and-residual-inside", "heads-first-constructor",
             "no-context-length", "keys-pre-permuted")
FORWARD = "input_tensor, attention_mask"
NOTES = ("MultiHeadAttention(n_heads, hidden_size, hidden_dropout_prob, attn_dropout_prob, layer_norm_eps); "
         "forward(input_tensor, attention_mask) -> LayerNorm(attention + input_tensor).")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'pass'
DIAGNOSIS = None
EXPECTED_BECAUSE = ("the BERT/SASRec layer given an additive causal mask is the lesson's layer inside a post-LayerNorm "
                    "residual: the norm is switched off and the input taken away, every check passes (layer_norm_eps "
                    "bound to torch's default 1e-5)")


class MultiHeadAttention(nn.Module):
    """
    Multi-head Self-attention layers, a attention score dropout layer is introduced.

    Args:
        input_tensor (torch.Tensor): the input of the multi-head self-attention layer
        attention_mask (torch.Tensor): the attention mask for input tensor

    Returns:
        hidden_states (torch.Tensor): the output of the multi-head self-attention layer

    """

    def __init__(
        self,
        n_heads,
        hidden_size,
        hidden_dropout_prob,
        attn_dropout_prob,
        layer_norm_eps,
    ):
        super(MultiHeadAttention, self).__init__()
        if hidden_size % n_heads != 0:
            raise ValueError(
                "The hidden size (%d) is not a multiple of the number of attention "
                "heads (%d)" % (hidden_size, n_heads)
            )

        self.num_attention_heads = n_heads
        self.attention_head_size = int(hidden_size / n_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.sqrt_attention_head_size = math.sqrt(self.attention_head_size)

        self.query = nn.Linear(hidden_size, self.all_head_size)
        self.key = nn.Linear(hidden_size, self.all_head_size)
        self.value = nn.Linear(hidden_size, self.all_head_size)

        self.softmax = nn.Softmax(dim=-1)
        self.attn_dropout = nn.Dropout(attn_dropout_prob)

        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.out_dropout = nn.Dropout(hidden_dropout_prob)

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (
            self.num_attention_heads,
            self.attention_head_size,
        )
        x = x.view(*new_x_shape)
        return x

    def forward(self, input_tensor, attention_mask):
        mixed_query_layer = self.query(input_tensor)
        mixed_key_layer = self.key(input_tensor)
        mixed_value_layer = self.value(input_tensor)

        query_layer = self.transpose_for_scores(mixed_query_layer).permute(0, 2, 1, 3)
        key_layer = self.transpose_for_scores(mixed_key_layer).permute(0, 2, 3, 1)
        value_layer = self.transpose_for_scores(mixed_value_layer).permute(0, 2, 1, 3)

        # Take the dot product between "query" and "key" to get the raw attention scores.
        attention_scores = torch.matmul(query_layer, key_layer)

        attention_scores = attention_scores / self.sqrt_attention_head_size
        # Apply the attention mask is (precomputed for all layers in BertModel forward() function)
        # [batch_size heads seq_len seq_len] scores
        # [batch_size 1 1 seq_len]
        attention_scores = attention_scores + attention_mask

        # Normalize the attention scores to probabilities.
        attention_probs = self.softmax(attention_scores)
        # This is actually dropping out entire tokens to attend to, which might
        # seem a bit unusual, but is taken from the original Transformer paper.

        attention_probs = self.attn_dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(*new_context_layer_shape)
        hidden_states = self.dense(context_layer)
        hidden_states = self.out_dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)

        return hidden_states
