"""Hugging Face transformers' BertSelfAttention (4.12.5): the CS224n / BERT form of multi-head attention WITHOUT an
output projection (BERT applies its dense layer, dropout and residual LayerNorm in a separate BertSelfOutput
module): query, key, value Linears with biases, transpose_for_scores (view(B, n, H, dh).permute(0, 2, 1, 3)), scores
divided by sqrt(head_size), causality only through an ADDITIVE attention_mask ARGUMENT (BertModel passes (1 - mask)
* -10000.0), softmax, attention dropout, the heads merged back - and returned as a tuple (context_layer,), with a
past_key_value tuple appended when config.is_decoder.

Source: https://github.com/huggingface/transformers/blob/v4.12.5/src/transformers/models/bert/modeling_bert.py
(copied from the PyPI wheel transformers==4.12.5, file transformers/models/bert/modeling_bert.py).
Licence: Apache-2.0 (the file's header: "Copyright 2018 The Google AI Language Team Authors and The HuggingFace Inc.
team.", "Copyright (c) 2018, NVIDIA CORPORATION.  All rights reserved.", "Licensed under the Apache License, Version
2.0"; LICENSE in the wheel's dist-info).
Copied: verbatim from the wheel (pip download --no-deps transformers==4.12.5): lines 19, 25 and 28 (`import math`,
`import torch`, `from torch import nn`) and 226-348 (BertSelfAttention). Left out: the rest of the module
(BertSelfOutput, BertAttention, the models, the mask-making of modeling_utils and the transformers imports).
ADDED: this docstring, the entry's constants, `BertConfig`, a stand-in for transformers' BertConfig holding only the
attributes BertSelfAttention reads (defaults those of configuration_bert.py in the same wheel: hidden_size=768,
num_attention_heads=12, attention_probs_dropout_prob=0.1, max_position_embeddings=512,
position_embedding_type="absolute"; is_decoder=False, PretrainedConfig's default), and the factory `build`.
Truth (_truth.py): bug under the lesson's contract - no output projection (the catalogue's no-output-projection): given
the additive causal mask (0 on and below the diagonal, -inf above; shape (n, n) or (1, 1, n, n)) its output is exactly
the lesson's layer before W_o: softmax(q k^T / sqrt(dh) + mask) v merged, with the biases of query, key and value;
equal to mha_forward with W_o = I and b_o = 0 (1e-16), not causal without the mask. With BertModel's -10000 fill the
future would come back once scores fall below -10000 (not this layer's doing: the mask is the caller's).
"""
import math
import torch
from torch import nn

TARGET = "build"
TRUTH = "bug"
BUG = "no-output-projection"
RULE_GAPS = ("no-output-projection-by-design", "additive-mask-argument", "config-object", "tuple-output",
             "relative-position-options")
FORWARD = ("hidden_states, attention_mask=None, head_mask=None, encoder_hidden_states=None, encoder_attention_mask=None, "
           "past_key_value=None, output_attentions=False")
NOTES = ("BertSelfAttention(config); TARGET is the added factory build(d, nheads, context_length, "
         "attention_probs_dropout_prob=0.1). forward returns (context_layer,); attention_mask is ADDED to the scores.")
# what mha-check must report (tests/e2e/test_realzoo.py): pass, fail, cannot_tell, or rules (math
# correct, only lesson rules not followed); and the known mistake it must name, or None
OUTCOME = 'fail'
DIAGNOSIS = 'no-output-projection'
EXPECTED_BECAUSE = ("BERT's self-attention stops before the output projection (BertSelfOutput applies it): given the "
                    "additive causal mask its output is the lesson's layer without W_o")


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        if config.hidden_size % config.num_attention_heads != 0 and not hasattr(config, "embedding_size"):
            raise ValueError(
                f"The hidden size ({config.hidden_size}) is not a multiple of the number of attention "
                f"heads ({config.num_attention_heads})"
            )

        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = int(config.hidden_size / config.num_attention_heads)
        self.all_head_size = self.num_attention_heads * self.attention_head_size

        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)

        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.position_embedding_type = getattr(config, "position_embedding_type", "absolute")
        if self.position_embedding_type == "relative_key" or self.position_embedding_type == "relative_key_query":
            self.max_position_embeddings = config.max_position_embeddings
            self.distance_embedding = nn.Embedding(2 * config.max_position_embeddings - 1, self.attention_head_size)

        self.is_decoder = config.is_decoder

    def transpose_for_scores(self, x):
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        x = x.view(*new_x_shape)
        return x.permute(0, 2, 1, 3)

    def forward(
        self,
        hidden_states,
        attention_mask=None,
        head_mask=None,
        encoder_hidden_states=None,
        encoder_attention_mask=None,
        past_key_value=None,
        output_attentions=False,
    ):
        mixed_query_layer = self.query(hidden_states)

        # If this is instantiated as a cross-attention module, the keys
        # and values come from an encoder; the attention mask needs to be
        # such that the encoder's padding tokens are not attended to.
        is_cross_attention = encoder_hidden_states is not None

        if is_cross_attention and past_key_value is not None:
            # reuse k,v, cross_attentions
            key_layer = past_key_value[0]
            value_layer = past_key_value[1]
            attention_mask = encoder_attention_mask
        elif is_cross_attention:
            key_layer = self.transpose_for_scores(self.key(encoder_hidden_states))
            value_layer = self.transpose_for_scores(self.value(encoder_hidden_states))
            attention_mask = encoder_attention_mask
        elif past_key_value is not None:
            key_layer = self.transpose_for_scores(self.key(hidden_states))
            value_layer = self.transpose_for_scores(self.value(hidden_states))
            key_layer = torch.cat([past_key_value[0], key_layer], dim=2)
            value_layer = torch.cat([past_key_value[1], value_layer], dim=2)
        else:
            key_layer = self.transpose_for_scores(self.key(hidden_states))
            value_layer = self.transpose_for_scores(self.value(hidden_states))

        query_layer = self.transpose_for_scores(mixed_query_layer)

        if self.is_decoder:
            # if cross_attention save Tuple(torch.Tensor, torch.Tensor) of all cross attention key/value_states.
            # Further calls to cross_attention layer can then reuse all cross-attention
            # key/value_states (first "if" case)
            # if uni-directional self-attention (decoder) save Tuple(torch.Tensor, torch.Tensor) of
            # all previous decoder key/value_states. Further calls to uni-directional self-attention
            # can concat previous decoder key/value_states to current projected key/value_states (third "elif" case)
            # if encoder bi-directional self-attention `past_key_value` is always `None`
            past_key_value = (key_layer, value_layer)

        # Take the dot product between "query" and "key" to get the raw attention scores.
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))

        if self.position_embedding_type == "relative_key" or self.position_embedding_type == "relative_key_query":
            seq_length = hidden_states.size()[1]
            position_ids_l = torch.arange(seq_length, dtype=torch.long, device=hidden_states.device).view(-1, 1)
            position_ids_r = torch.arange(seq_length, dtype=torch.long, device=hidden_states.device).view(1, -1)
            distance = position_ids_l - position_ids_r
            positional_embedding = self.distance_embedding(distance + self.max_position_embeddings - 1)
            positional_embedding = positional_embedding.to(dtype=query_layer.dtype)  # fp16 compatibility

            if self.position_embedding_type == "relative_key":
                relative_position_scores = torch.einsum("bhld,lrd->bhlr", query_layer, positional_embedding)
                attention_scores = attention_scores + relative_position_scores
            elif self.position_embedding_type == "relative_key_query":
                relative_position_scores_query = torch.einsum("bhld,lrd->bhlr", query_layer, positional_embedding)
                relative_position_scores_key = torch.einsum("bhrd,lrd->bhlr", key_layer, positional_embedding)
                attention_scores = attention_scores + relative_position_scores_query + relative_position_scores_key

        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        if attention_mask is not None:
            # Apply the attention mask is (precomputed for all layers in BertModel forward() function)
            attention_scores = attention_scores + attention_mask

        # Normalize the attention scores to probabilities.
        attention_probs = nn.Softmax(dim=-1)(attention_scores)

        # This is actually dropping out entire tokens to attend to, which might
        # seem a bit unusual, but is taken from the original Transformer paper.
        attention_probs = self.dropout(attention_probs)

        # Mask heads if we want to
        if head_mask is not None:
            attention_probs = attention_probs * head_mask

        context_layer = torch.matmul(attention_probs, value_layer)

        context_layer = context_layer.permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        context_layer = context_layer.view(*new_context_layer_shape)

        outputs = (context_layer, attention_probs) if output_attentions else (context_layer,)

        if self.is_decoder:
            outputs = outputs + (past_key_value,)
        return outputs


# --- added for the zoo: a stand-in for transformers' BertConfig (only what BertSelfAttention reads) and a factory ---
class BertConfig:
    def __init__(self, hidden_size=768, num_attention_heads=12, attention_probs_dropout_prob=0.1,
                 max_position_embeddings=512, position_embedding_type="absolute", is_decoder=False):
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.attention_probs_dropout_prob = attention_probs_dropout_prob
        self.max_position_embeddings = max_position_embeddings
        self.position_embedding_type = position_embedding_type
        self.is_decoder = is_decoder


def build(d, nheads, context_length, attention_probs_dropout_prob=0.1):
    return BertSelfAttention(BertConfig(hidden_size=d, num_attention_heads=nheads, max_position_embeddings=context_length,
                                        attention_probs_dropout_prob=attention_probs_dropout_prob))
